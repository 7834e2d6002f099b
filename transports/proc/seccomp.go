package proc

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ipprotoMPTCP is IPPROTO_MPTCP: Landlock's TCP rules do not cover
// multipath TCP sockets (a socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)
// connects and binds any port inside the domain; Go's own listeners use
// one by default since Go 1.24), so a tree with network rules is refused
// such sockets and programs fall back to plain TCP.
const ipprotoMPTCP = 262

// auditArch is the seccomp architecture of this build; 0 where the
// filter below does not know the layout (then MPTCP stays open).
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// NoMPTCPHolds reports whether refuseMPTCP works on this build.
func NoMPTCPHolds() bool { return auditArch() != 0 }

// refuseMPTCP installs, on the calling (locked, no_new_privs) thread, a
// seccomp filter that fails socket(…, IPPROTO_MPTCP) with
// EPROTONOSUPPORT; children inherit it. Other syscalls of other
// architectures (a 32-bit program's socketcall) pass.
func refuseMPTCP() error {
	arch := auditArch()
	if arch == 0 {
		return nil
	}
	const (
		ldAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		retK   = unix.BPF_RET | unix.BPF_K
		// struct seccomp_data: nr at 0, arch at 4, args[] at 16 (the low
		// half of args[2] at 32 on these little-endian architectures)
		offNr, offArch, offArg2 = 0, 4, 32
	)
	filter := []unix.SockFilter{
		{Code: ldAbsW, K: offArch},
		{Code: jeqK, Jt: 0, Jf: 5, K: arch},
		{Code: ldAbsW, K: offNr},
		{Code: jeqK, Jt: 0, Jf: 3, K: uint32(unix.SYS_SOCKET)},
		{Code: ldAbsW, K: offArg2},
		{Code: jeqK, Jt: 0, Jf: 1, K: ipprotoMPTCP},
		{Code: retK, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPROTONOSUPPORT)},
		{Code: retK, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("proc: seccomp (no multipath TCP): %w", err)
	}
	return nil
}
