package diffcapture

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// FuzzGitOutput feeds the parsers of git's output (which names paths an
// agent chose) arbitrary bytes: they return an error or records, never
// panic, and the writer that splits a diff's records from its patch loses
// and invents no byte.
func FuzzGitOutput(f *testing.F) {
	for _, seed := range []string{
		"# branch.oid 1c0774960f9bacb6f76d186897b4fca14cc42d8d\x00# branch.head main\x00" +
			"1 M. N... 100644 100644 100644 78981922613b2afb6025042ff6bd878ac1994e85 9ad2ebbaff6f3397bb65002dcf4294d8d6243982 a b.txt\x00" +
			"u UU N... 100644 100644 100644 100644 1 2 3 c.txt\x00? new file.txt\x00",
		"# branch.oid (initial)\x00? x\x00",
		":100644 100644 7898192 9ad2ebb M\x00a.txt\x00:000000 100644 0000000 f2ad6c7 A\x00c.txt\x001\t0\ta.txt\x001\t0\tc.txt\x00\x00diff --git a/a.txt b/a.txt\n",
		":100644 100644 a b R100\x00old\x00new\x000\t0\t\x00old\x00new\x00\x00diff",
		"1 short\x00",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		if st, err := parseStatusV2(out); err == nil {
			if len(st.changed)+len(st.untracked) > len(st.paths) {
				t.Fatalf("more changed and untracked entries (%d+%d) than paths (%d)", len(st.changed), len(st.untracked), len(st.paths))
			}
		}
		_, _ = parseRawNumstat(out)
		w := &headedWriter{patch: capWriter{max: 1 << 20}}
		for i := 0; i < len(out); i += 7 { // in pieces, as a pipe delivers
			if _, err := w.Write(out[i:min(i+7, len(out))]); err != nil {
				t.Fatal(err)
			}
		}
		got := w.head
		if w.inPatch {
			got = append(append(append([]byte{}, w.head...), 0), w.patch.buf.Bytes()...)
		}
		if !bytes.Equal(got, out) {
			t.Fatalf("the split lost or invented bytes: %q -> head %q, patch %q", out, w.head, w.patch.buf.Bytes())
		}
	})
}

// FuzzIndexGitlinks feeds the index parser (whose names come from the work
// tree) real index files of every version and their mutations: it answers
// or errs, never panics or reads past the end.
func FuzzIndexGitlinks(f *testing.F) {
	if _, err := exec.LookPath("git"); err == nil {
		r := newRepo(f)
		r.write("a.txt", "a\n")
		r.write("dir/b.txt", "b\n")
		r.commitAll("init")
		for _, v := range []string{"2", "3", "4"} {
			r.git("update-index", "--index-version", v)
			b, err := os.ReadFile(r.path(".git/index"))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, uint8(20))
		}
	}
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x00"), uint8(20))
	f.Fuzz(func(t *testing.T, b []byte, hashSize uint8) {
		_, _ = parseIndexGitlinks(b, int(hashSize%40))
	})
}
