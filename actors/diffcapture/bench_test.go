package diffcapture

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// benchRepo is one generated 10,000-file repository shared by the
// benchmarks of a run (TestMain removes it).
var benchRepo struct {
	once sync.Once
	dir  string
	err  error
}

const benchFiles = 10_000

func sharedRepo(b *testing.B) *testRepo {
	b.Helper()
	requireGit(b)
	benchRepo.once.Do(func() {
		dir, err := os.MkdirTemp("", "diffcapture-bench-")
		if err != nil {
			benchRepo.err = err
			return
		}
		benchRepo.dir = dir
		r := &testRepo{tb: b, dir: dir}
		r.git("init", "-q", "-b", "main")
		r.git("config", "user.name", "Diff Bench")
		r.git("config", "user.email", "bench@test.invalid")
		r.generate(benchFiles)
		// dirty before every turn: the baseline has to snapshot it
		r.write(genPath(5000), genContent(5000)+"// dirty before the turn\n")
	})
	require.NoError(b, benchRepo.err)
	return &testRepo{tb: b, dir: benchRepo.dir}
}

// The turn every iteration replays: three files modified, two new
// untracked files, one file deleted; then undone, untimed.
var (
	benchModified = []int{0, 4321, 9998}
	benchDeleted  = 777
	benchNew      = []string{"pkg010/new_a.go", "pkg020/new_b.go"}
)

func benchTurn(r *testRepo) {
	for _, i := range benchModified {
		r.write(genPath(i), genContent(i)+"// changed by the turn\n")
	}
	for _, p := range benchNew {
		r.write(p, "package new\n")
	}
	r.remove(genPath(benchDeleted))
}

func benchUndo(r *testRepo) {
	for _, i := range benchModified {
		r.write(genPath(i), genContent(i))
	}
	for _, p := range benchNew {
		r.remove(p)
	}
	r.write(genPath(benchDeleted), genContent(benchDeleted))
}

func checkBenchDiff(b *testing.B, d messages.TurnDiff) {
	if d.Warning != "" || d.Source != messages.DiffGit || len(d.Files) != 6 {
		b.Fatalf("unexpected capture: %+v", d)
	}
}

// captureOnce is one turn's capture on the turn's path: Begin and Finish.
// The turn itself is not timed, nor the Settle after each answer, which
// the session's differ runs while the turn starts or the driver reads.
func captureOnce(b *testing.B, r *testRepo, g *Git) (onPath time.Duration) {
	ctx := context.Background()
	t0 := time.Now()
	base, _ := g.Begin(ctx)
	onPath = time.Since(t0)
	b.StopTimer()
	g.Settle(ctx)
	benchTurn(r)
	b.StartTimer()
	t0 = time.Now()
	d := g.Finish(ctx, base, nil)
	onPath += time.Since(t0)
	b.StopTimer()
	g.Settle(ctx)
	checkBenchDiff(b, d)
	benchUndo(r)
	b.StartTimer()
	return onPath
}

// bareOnce runs the git commands seed 000 §6 names, with nothing around
// them: at Begin, HEAD, status and the hashes of the files already dirty;
// at Finish, diff -M against the start commit (numstat and patch), status
// again for the new untracked files and diff --no-index for each of them.
func bareOnce(b *testing.B, r *testRepo, g *Git) (onPath time.Duration) {
	ctx := context.Background()
	t0 := time.Now()
	run := &runner{bin: "git", dir: r.dir, env: g.env}
	must := func(out []byte, err error) []byte {
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	head := string(must(run.output(ctx, "rev-parse", "-q", "--verify", "HEAD")))
	head = head[:len(head)-1]
	st := must(run.output(ctx, "status", "--porcelain", "-z", "-uall"))
	var dirty []byte
	for _, rec := range fields(st) {
		dirty = append(append(dirty, rec[3:]...), '\n')
	}
	must(run.input(ctx, dirty, "hash-object", "--stdin-paths"))
	onPath = time.Since(t0)
	b.StopTimer()
	benchTurn(r)
	b.StartTimer()
	t0 = time.Now()
	must(run.output(ctx, "diff", "--no-ext-diff", "--no-textconv", "-M", "-z", "--numstat", head))
	must(run.output(ctx, "diff", "--no-ext-diff", "--no-textconv", "-M", head))
	st2 := must(run.output(ctx, "status", "--porcelain", "-z", "-uall"))
	n := 0
	for _, rec := range fields(st2) {
		if rec[:3] == "?? " {
			n++
			// exit status 1 means "differs"
			_, _ = run.output(ctx, "diff", "--no-ext-diff", "--no-textconv", "--no-index", "/dev/null", rec[3:])
		}
	}
	onPath += time.Since(t0)
	b.StopTimer()
	if n != len(benchNew) {
		b.Fatalf("bare status saw %d untracked files, want %d", n, len(benchNew))
	}
	benchUndo(r)
	b.StartTimer()
	return onPath
}

// BenchmarkCapture times Begin plus Finish on the 10,000-file repository.
func BenchmarkCapture(b *testing.B) {
	r := sharedRepo(b)
	g := NewGit(r.dir)
	captureOnce(b, r, g) // warm the page cache
	b.ResetTimer()
	for range b.N {
		captureOnce(b, r, g)
	}
}

// BenchmarkBareGit times the bare git commands of the same turn.
func BenchmarkBareGit(b *testing.B) {
	r := sharedRepo(b)
	g := NewGit(r.dir)
	bareOnce(b, r, g)
	b.ResetTimer()
	for range b.N {
		bareOnce(b, r, g)
	}
}

// BenchmarkCaptureVsBareGit alternates the two in every iteration, so load
// from elsewhere on the machine falls on both alike, and reports the ratio
// (capture time / bare time, each on the turn's path only: Settle, the
// turn's edits and their undoing are not counted) as x-bare.
func BenchmarkCaptureVsBareGit(b *testing.B) {
	r := sharedRepo(b)
	g := NewGit(r.dir)
	captureOnce(b, r, g)
	bareOnce(b, r, g)
	var capT, bareT time.Duration
	b.ResetTimer()
	for range b.N {
		capT += captureOnce(b, r, g)
		bareT += bareOnce(b, r, g)
	}
	b.StopTimer()
	b.ReportMetric(float64(capT.Microseconds())/float64(b.N)/1000, "capture-ms/op")
	b.ReportMetric(float64(bareT.Microseconds())/float64(b.N)/1000, "bare-ms/op")
	b.ReportMetric(float64(capT)/float64(bareT), "x-bare")
}
