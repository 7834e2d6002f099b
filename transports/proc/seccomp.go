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

// x32SyscallBit marks a syscall of amd64's x32 ABI (__X32_SYSCALL_BIT):
// such a call has the x86-64 audit arch, so without this check a program
// could make its socket() through the x32 table and pass the filter.
const x32SyscallBit = 0x40000000

// refuseMPTCP installs, on the calling (locked, no_new_privs) thread, the
// mptcpFilter of this build; children inherit it.
func refuseMPTCP() error {
	arch := auditArch()
	if arch == 0 {
		return nil
	}
	filter := mptcpFilter(arch, unix.SYS_SOCKET, runtime.GOARCH == "amd64")
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("proc: seccomp (no multipath TCP): %w", err)
	}
	return nil
}

// mptcpFilter is the seccomp program: socket(…, IPPROTO_MPTCP) of arch
// (whose socket syscall number is socketNr)
// fails with EPROTONOSUPPORT (programs fall back to plain TCP); with x32,
// every x32 syscall fails with ENOSYS (no x32 program is expected, and its
// socket() is another syscall number); other syscalls, and those of other
// architectures pass: on amd64, a 32-bit (i386) program's socket and
// socketcall are not checked (socketcall's arguments sit behind a pointer
// seccomp cannot follow), so such a program could still open a multipath
// TCP socket.
func mptcpFilter(arch uint32, socketNr int, x32 bool) []unix.SockFilter {
	const (
		ldAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		retK   = unix.BPF_RET | unix.BPF_K
		// struct seccomp_data: nr at 0, arch at 4, args[] at 16 (the low
		// half of args[2] at 32 on these little-endian architectures)
		offNr, offArch, offArg2 = 0, 4, 32
		allow                   = unix.SECCOMP_RET_ALLOW
		noMPTCP                 = unix.SECCOMP_RET_ERRNO | uint32(unix.EPROTONOSUPPORT)
		noX32                   = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	// jumps are relative to the next instruction; x is 1 with the x32
	// check (one more instruction before the socket check)
	x := uint8(0)
	if x32 {
		x = 1
	}
	prog := []unix.SockFilter{
		/* 0 */ {Code: ldAbsW, K: offArch},
		/* 1 */ {Code: jeqK, Jt: 0, Jf: 5 + x, K: arch}, // other arch: allow
		/* 2 */ {Code: ldAbsW, K: offNr},
	}
	if x32 {
		/* 3 */ prog = append(prog, unix.SockFilter{Code: jgeK, Jt: 5, Jf: 0, K: x32SyscallBit}) // noX32
	}
	prog = append(prog,
		/* 3+x */ unix.SockFilter{Code: jeqK, Jt: 0, Jf: 3, K: uint32(socketNr)}, // not socket: allow
		/* 4+x */ unix.SockFilter{Code: ldAbsW, K: offArg2},
		/* 5+x */ unix.SockFilter{Code: jeqK, Jt: 0, Jf: 1, K: ipprotoMPTCP},
		/* 6+x */ unix.SockFilter{Code: retK, K: noMPTCP},
		/* 7+x */ unix.SockFilter{Code: retK, K: allow},
	)
	if x32 {
		/* 9 */ prog = append(prog, unix.SockFilter{Code: retK, K: noX32})
	}
	return prog
}
