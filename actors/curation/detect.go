package curation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Bounds on what detection reads of a repository (outside input): a file
// past MaxReadBytes is read only that far, a directory lists at most
// MaxDirEntries names.
const (
	MaxReadBytes  = 256 << 10
	MaxDirEntries = 256
)

// Tree reads a project's files. Paths are slash paths relative to the
// project root. Implementations bound what they read.
type Tree interface {
	// ReadFile returns at most MaxReadBytes of the file; a missing file is
	// fs.ErrNotExist.
	ReadFile(name string) ([]byte, error)
	// ReadDir lists at most MaxDirEntries regular-file names of a directory.
	ReadDir(name string) ([]string, error)
}

// DirTree is a Tree over a directory, through os.Root: a symlink that
// leads out of the project is refused, never followed.
type DirTree struct{ root *os.Root }

// OpenDir opens a project directory as a Tree; Close it when done.
func OpenDir(dir string) (*DirTree, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &DirTree{root: r}, nil
}

// Close releases the directory.
func (t *DirTree) Close() error { return t.root.Close() }

// ReadFile reads at most MaxReadBytes of a regular file.
func (t *DirTree) ReadFile(name string) ([]byte, error) {
	f, err := t.root.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	return io.ReadAll(io.LimitReader(f, MaxReadBytes))
}

// ReadDir lists a directory's regular files, sorted, at most MaxDirEntries.
func (t *DirTree) ReadDir(name string) ([]string, error) {
	f, err := t.root.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(MaxDirEntries)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// MapTree is a Tree over an in-memory map (tests, fuzzing).
type MapTree map[string]string

// ReadFile returns the file's bytes, capped.
func (m MapTree) ReadFile(name string) ([]byte, error) {
	s, ok := m[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	if len(s) > MaxReadBytes {
		s = s[:MaxReadBytes]
	}
	return []byte(s), nil
}

// ReadDir lists the files directly in dir.
func (m MapTree) ReadDir(dir string) ([]string, error) {
	var out []string
	for k := range m {
		if path.Dir(k) == dir {
			out = append(out, path.Base(k))
		}
	}
	if len(out) == 0 {
		return nil, fs.ErrNotExist
	}
	sort.Strings(out)
	if len(out) > MaxDirEntries {
		out = out[:MaxDirEntries]
	}
	return out, nil
}

// The files the structured rules look at.
var (
	depFiles     = []string{"package.json", "go.mod", "pyproject.toml", "requirements.txt"}
	composeFiles = []string{"compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml"}
)

const workflowsDir = ".github/workflows"

// snapshot is the bytes of every file a catalog's rules can look at, read
// once: detection is pure over it, and its hash keys the profile cache.
type snapshot struct {
	files map[string][]byte // present files only
}

func takeSnapshot(t Tree, c *Catalog) snapshot {
	s := snapshot{files: map[string][]byte{}}
	read := func(name string) {
		if _, done := s.files[name]; done {
			return
		}
		if b, err := t.ReadFile(name); err == nil {
			s.files[name] = b
		}
	}
	for _, n := range depFiles {
		read(n)
	}
	for _, n := range composeFiles {
		read(n)
	}
	if names, err := t.ReadDir(workflowsDir); err == nil {
		for _, n := range names {
			if strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".yaml") {
				read(workflowsDir + "/" + n)
			}
		}
	}
	for _, e := range c.Entries {
		for _, r := range e.Detect {
			if r.Path != "" {
				read(r.Path)
			}
		}
	}
	return s
}

// key hashes the snapshot (names and contents) with the catalog's digest.
func (s snapshot) key(c *Catalog) string {
	names := make([]string, 0, len(s.files))
	for n := range s.files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	io.WriteString(h, "catalog "+c.Digest()+"\n")
	for _, n := range names {
		sum := sha256.Sum256(s.files[n])
		io.WriteString(h, n+"\x00"+hex.EncodeToString(sum[:])+"\n")
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Detect evaluates every entry's rules over the snapshot: the ids of the
// entries with a matching rule, in catalog order.
func detect(s snapshot, c *Catalog) []string {
	deps := dependencies(s)
	var out []string
	for _, e := range c.Entries {
		if slices.ContainsFunc(e.Detect, func(r Rule) bool { return r.match(s, deps) }) {
			out = append(out, e.ID)
		}
	}
	return out
}

// DetectTree takes a snapshot of t and detects c's capabilities in it.
func DetectTree(t Tree, c *Catalog) []string { return detect(takeSnapshot(t, c), c) }

func (r Rule) match(s snapshot, deps map[string]bool) bool {
	switch r.Kind {
	case RuleFileExists:
		_, ok := s.files[r.Path]
		return ok
	case RulePackageDep:
		return deps[r.Name]
	case RuleFileContent:
		b, ok := s.files[r.Path]
		return ok && r.re.Match(b)
	case RuleWorkflowAction:
		for n, b := range s.files {
			if strings.HasPrefix(n, workflowsDir+"/") && anyValue(usesLine, b, r.re) {
				return true
			}
		}
	case RuleComposeService:
		for _, n := range composeFiles {
			if b, ok := s.files[n]; ok && anyValue(imageLine, b, r.re) {
				return true
			}
		}
	}
	return false
}

var (
	usesLine  = regexp.MustCompile(`(?m)^\s*(?:-\s*)?uses:\s*["']?([^\s"'#]+)`)
	imageLine = regexp.MustCompile(`(?m)^\s*image:\s*["']?([^\s"'#]+)`)
	goRequire = regexp.MustCompile(`(?m)^\s*(?:require\s+)?([A-Za-z0-9._~/-]+\.[A-Za-z0-9._~/-]+)\s+v[0-9]`)
	pyDep     = regexp.MustCompile(`(?m)(?:^|["'\s,\[])([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:[<>=!~;]|["',]|$)`)
)

// anyValue reports whether a line's captured value matches re.
func anyValue(line *regexp.Regexp, b []byte, re *regexp.Regexp) bool {
	for _, m := range line.FindAllSubmatch(b, -1) {
		if re.Match(m[1]) {
			return true
		}
	}
	return false
}

// dependencies are the package names the project's manifests declare:
// package.json's four dependency maps, go.mod's requirements, and the
// names in pyproject.toml's and requirements.txt's dependency lines.
func dependencies(s snapshot) map[string]bool {
	deps := map[string]bool{}
	if b, ok := s.files["package.json"]; ok {
		var pkg map[string]json.RawMessage
		if json.Unmarshal(b, &pkg) == nil {
			for _, k := range []string{"dependencies", "devDependencies", "peerDependencies", "optionalDependencies"} {
				var m map[string]any
				if json.Unmarshal(pkg[k], &m) == nil {
					for name := range m {
						deps[name] = true
					}
				}
			}
		}
	}
	if b, ok := s.files["go.mod"]; ok {
		for _, m := range goRequire.FindAllSubmatch(b, -1) {
			deps[string(m[1])] = true
		}
	}
	for _, n := range []string{"pyproject.toml", "requirements.txt"} {
		b, ok := s.files[n]
		if !ok {
			continue
		}
		if n == "pyproject.toml" {
			b = pyDependencyText(b)
		}
		for _, m := range pyDep.FindAllSubmatch(b, -1) {
			deps[strings.ToLower(string(m[1]))] = true
		}
	}
	return deps
}

// pyDependencyText is the part of a pyproject.toml that lists
// dependencies: the dependencies arrays and the [tool.poetry.dependencies]
// style tables (a name = version line each).
func pyDependencyText(b []byte) []byte {
	var out bytes.Buffer
	inArray, inTable := false, false
	for _, line := range bytes.Split(b, []byte("\n")) {
		t := bytes.TrimSpace(line)
		switch {
		case bytes.HasPrefix(t, []byte("[")) && !inArray:
			inTable = bytes.HasSuffix(t, []byte("dependencies]"))
			continue
		case inArray:
			out.Write(t)
			out.WriteByte('\n')
			if bytes.Contains(t, []byte("]")) && !bytes.Contains(t, []byte("[")) {
				inArray = false
			}
			continue
		case bytes.Contains(t, []byte("dependencies")) && bytes.Contains(t, []byte("= [")):
			_, rest, _ := bytes.Cut(t, []byte("= ["))
			out.Write(rest)
			out.WriteByte('\n')
			inArray = !bytes.Contains(rest, []byte("]"))
			continue
		case inTable:
			name, _, ok := bytes.Cut(t, []byte("="))
			if ok {
				out.Write(bytes.TrimSpace(name))
				out.WriteString("=\n")
			}
		}
	}
	return out.Bytes()
}

// ProfilesDir is where detected project profiles are cached, in the home.
const ProfilesDir = "project-profiles"

// Profile is one project's detection, cached by the key of what it read.
type Profile struct {
	Key      string    `json:"key"`
	Dir      string    `json:"dir"`
	Detected []string  `json:"detected"`
	At       time.Time `json:"at"`
}

// DetectProject detects c's capabilities in the project at dir, through
// the profile cache under home (none when home is ""): a profile whose key
// (a hash of the files the rules look at and of the catalog) matches is
// reused; otherwise the rules run and the profile is written. cached says
// which.
func DetectProject(home, dir string, c *Catalog, now time.Time) (p Profile, cached bool, err error) {
	t, err := OpenDir(dir)
	if err != nil {
		return Profile{}, false, err
	}
	defer t.Close()
	s := takeSnapshot(t, c)
	key := s.key(c)
	file := ""
	if home != "" {
		file = filepath.Join(home, ProfilesDir, key+".json")
		if b, err := os.ReadFile(file); err == nil {
			var old Profile
			if json.Unmarshal(b, &old) == nil && old.Key == key {
				return old, true, nil
			}
		}
	}
	p = Profile{Key: key, Dir: dir, Detected: detect(s, c), At: now.UTC()}
	if file != "" {
		if b, err := json.Marshal(p); err == nil {
			_ = writeAtomic(file, b, 0o600) // a cache: a failed write only costs the next start a detection
		}
	}
	return p, false, nil
}

// writeAtomic writes a file through a temp file and a rename.
func writeAtomic(name string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
