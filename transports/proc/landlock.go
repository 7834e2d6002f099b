package proc

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Confinement restricts a command's writes to WritableDirs (and the
// character devices every shell writes to, such as /dev/null). Reads and
// execution stay unrestricted, so toolchains outside the workspace work.
type Confinement struct {
	WritableDirs []string
}

// writeRights are the filesystem rights Landlock takes away outside the
// writable directories: everything that creates, changes or removes a file.
const writeRights = landlock.AccessFSSet(llsys.AccessFSWriteFile | llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile |
	llsys.AccessFSMakeChar | llsys.AccessFSMakeDir | llsys.AccessFSMakeReg | llsys.AccessFSMakeSock |
	llsys.AccessFSMakeFifo | llsys.AccessFSMakeBlock | llsys.AccessFSMakeSym | llsys.AccessFSRefer | llsys.AccessFSTruncate)

// fileRights are the rights that apply to a single (device) file.
const fileRights = landlock.AccessFSSet(llsys.AccessFSWriteFile | llsys.AccessFSTruncate)

// devices every shell may write to.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx"}

type ruleset struct {
	fd    int
	flags uint32
}

func (r *ruleset) close() { _ = syscall.Close(r.fd) }

// restrictThread puts the calling (locked) OS thread into the ruleset's
// domain, with no_new_privs, which Landlock requires of an unprivileged
// caller and which children inherit.
func (r *ruleset) restrictThread() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("proc: prctl(no_new_privs): %w", err)
	}
	if err := llsys.LandlockRestrictSelf(r.fd, r.flags); err != nil {
		return fmt.Errorf("proc: landlock_restrict_self: %w", err)
	}
	return nil
}

// ruleset builds the Landlock ruleset (best effort: a kernel without
// Landlock gives nil and how == ""). extra are more writable directories.
func (c *Confinement) ruleset(extra []string) (*ruleset, string, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return nil, "", nil
	}
	dirs := append(append([]string{}, c.WritableDirs...), extra...)
	cfg := landlock.Config{HandledAccessFS: writeRights}.BestEffort()
	fd, flags, err := cfg.NewRulesetFD(
		landlock.PathAccess(writeRights, dirs...),
		landlock.PathAccess(fileRights, devices...).IgnoreIfMissing(),
	)
	if err != nil {
		return nil, "", fmt.Errorf("proc: landlock ruleset: %w", err)
	}
	if fd < 0 {
		return nil, "", nil
	}
	return &ruleset{fd: fd, flags: flags}, fmt.Sprintf("landlock ABI %d: writes only under %s", abi, strings.Join(c.WritableDirs, ", ")), nil
}

// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func LandlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}
