package gate_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/codesession/codesession/transports/gate"
)

// BenchmarkResolve resolves the paths the native `ls` and file tools pass
// most: the workspace itself and a file in it, with the workspace opened
// by its real path (the readings as given and as real are the same string,
// walked once) and through a symlink (two different strings, both walked).
func BenchmarkResolve(b *testing.B) {
	real := b.TempDir()
	if err := os.WriteFile(filepath.Join(real, "main.go"), []byte("package main\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	link := filepath.Join(b.TempDir(), "ws")
	if err := os.Symlink(real, link); err != nil {
		b.Fatal(err)
	}
	for _, ws := range []struct{ name, dir string }{{"real", real}, {"symlink", link}} {
		w, err := gate.NewWorkspace(ws.dir)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range []string{".", "main.go"} {
			b.Run(ws.name+"/"+p, func(b *testing.B) {
				for b.Loop() {
					if _, err := w.Resolve(p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
