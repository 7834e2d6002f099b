package diffcapture

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/codesession/codesession/messages"
)

// fields splits NUL-terminated git output into its records.
func fields(out []byte) []string {
	out = bytes.TrimSuffix(out, []byte{0})
	if len(out) == 0 {
		return nil
	}
	parts := bytes.Split(out, []byte{0})
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = string(p)
	}
	return s
}

// statusV2 is what `git status --porcelain=v2 -z` says: every path it
// reports (changed against HEAD or the index, unmerged, or untracked),
// relative to the top of the work tree.
type statusV2 struct {
	paths []string
	// with --branch: HEAD ("" while unborn)
	head string
	// changed are the ordinary changed entries ("1" records) with HEAD's
	// mode and object as the source; untracked the "?" records; unmerged
	// says a "u" record came (its stages say nothing of HEAD)
	changed   []rawEntry
	untracked []string
	unmerged  bool
}

func parseStatusV2(out []byte) (statusV2, error) {
	var st statusV2
	recs := fields(out)
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if rec == "" {
			continue
		}
		switch rec[0] {
		case '#': // headers (--branch, --show-stash)
			if oid, ok := strings.CutPrefix(rec, "# branch.oid "); ok && oid != "(initial)" {
				st.head = oid
			}
		case '1': // 1 XY sub mH mI mW hH hI path
			p, err := nthField(rec, 8)
			if err != nil {
				return st, err
			}
			st.paths = append(st.paths, p)
			f := strings.SplitN(rec, " ", 9)
			st.changed = append(st.changed, rawEntry{srcMode: f[3], srcOID: f[6], status: 'M', src: p})
		case '2': // 2 XY sub mH mI mW hH hI Xscore path NUL origPath
			p, err := nthField(rec, 9)
			if err != nil {
				return st, err
			}
			st.paths = append(st.paths, p)
			if i+1 < len(recs) {
				i++
				st.paths = append(st.paths, recs[i])
			}
		case 'u': // u XY sub m1 m2 m3 mW h1 h2 h3 path
			p, err := nthField(rec, 10)
			if err != nil {
				return st, err
			}
			st.paths = append(st.paths, p)
			st.unmerged = true
		case '?', '!':
			if len(rec) < 3 {
				return st, fmt.Errorf("git status: short record %q", rec)
			}
			st.paths = append(st.paths, rec[2:])
			if rec[0] == '?' {
				st.untracked = append(st.untracked, rec[2:])
			}
		default:
			return st, fmt.Errorf("git status: unknown record %q", cut(rec, 40))
		}
	}
	return st, nil
}

// nthField returns what follows the first n space-separated fields of rec:
// the path, which may itself hold spaces.
func nthField(rec string, n int) (string, error) {
	rest := rec
	for range n {
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			return "", fmt.Errorf("git: short record %q", cut(rec, 40))
		}
		rest = rest[i+1:]
	}
	return rest, nil
}

// rawEntry is one record of --raw output.
type rawEntry struct {
	srcMode, dstMode string
	srcOID, dstOID   string
	status           byte
	src, dst         string // dst only for renames and copies
}

func (e rawEntry) path() string {
	if e.dst != "" {
		return e.dst
	}
	return e.src
}

// parseRaw reads `--raw -z` records from recs starting at i; it stops at
// the first record that is not one and returns where.
func parseRaw(recs []string, i int) ([]rawEntry, int, error) {
	var out []rawEntry
	for i < len(recs) && strings.HasPrefix(recs[i], ":") {
		f := strings.Fields(recs[i][1:])
		if len(f) != 5 || f[4] == "" {
			return nil, i, fmt.Errorf("git: bad raw record %q", cut(recs[i], 80))
		}
		e := rawEntry{srcMode: f[0], dstMode: f[1], srcOID: f[2], dstOID: f[3], status: f[4][0]}
		if i+1 >= len(recs) {
			return nil, i, fmt.Errorf("git: raw record without a path")
		}
		e.src = recs[i+1]
		i += 2
		if e.status == 'R' || e.status == 'C' {
			if i >= len(recs) {
				return nil, i, fmt.Errorf("git: rename record without its destination")
			}
			e.dst = recs[i]
			i++
		}
		out = append(out, e)
	}
	return out, i, nil
}

// parseRawNumstat reads `diff-index -z --raw --numstat` output: the raw
// records, then one numstat record for each, in the same order.
func parseRawNumstat(out []byte) ([]messages.FileChange, error) {
	recs := fields(out)
	raws, i, err := parseRaw(recs, 0)
	if err != nil {
		return nil, err
	}
	files := make([]messages.FileChange, 0, len(raws))
	for _, e := range raws {
		if i >= len(recs) {
			return nil, fmt.Errorf("git diff: %d raw records but fewer numstat records", len(raws))
		}
		ins, after, ok1 := strings.Cut(recs[i], "\t")
		del, rest, ok2 := strings.Cut(after, "\t")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("git diff: bad numstat record %q", cut(recs[i], 80))
		}
		i++
		if rest == "" { // a rename: the two paths follow
			i += 2
		}
		fc := messages.FileChange{Path: e.path(), Status: statusLetter(e.status)}
		if e.dst != "" {
			fc.OldPath = e.src
		}
		if ins == "-" && del == "-" {
			fc.Binary = true
		} else {
			fc.Insertions, _ = strconv.Atoi(ins)
			fc.Deletions, _ = strconv.Atoi(del)
		}
		files = append(files, fc)
	}
	return files, nil
}

// statusLetter maps git's status letters onto A, M, D and R: a type change
// (file to symlink) is a modification, a copy is an addition.
func statusLetter(s byte) string {
	switch s {
	case 'A', 'C':
		return "A"
	case 'D':
		return "D"
	case 'R':
		return "R"
	default:
		return "M"
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
