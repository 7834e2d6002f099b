package proc

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// runFilter runs the seccomp program on a struct seccomp_data with nr,
// arch and args[2] in x/net/bpf's virtual machine, which loads words
// big-endian: the words are written so, at the offsets the kernel's
// little-endian layout gives them.
func runFilter(t *testing.T, prog []unix.SockFilter, nr, arch, arg2 uint32) uint32 {
	t.Helper()
	raw := make([]bpf.Instruction, len(prog))
	for i, f := range prog {
		raw[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}.Disassemble()
	}
	vm, err := bpf.NewVM(raw)
	require.NoError(t, err)
	data := make([]byte, 64) // nr, arch, instruction_pointer, args[6]
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], arch)
	binary.BigEndian.PutUint32(data[32:], arg2)
	out, err := vm.Run(data)
	require.NoError(t, err)
	return uint32(out)
}

// TestMPTCPFilter: the program refuses a multipath TCP socket of its
// architecture and, on amd64, every x32 syscall (whose socket() would
// otherwise pass with the same audit arch: the old filter allowed it);
// plain TCP sockets, other syscalls and other architectures pass.
func TestMPTCPFilter(t *testing.T) {
	const (
		allow   = unix.SECCOMP_RET_ALLOW
		noMPTCP = unix.SECCOMP_RET_ERRNO | uint32(unix.EPROTONOSUPPORT)
		noX32   = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		// x32's socket is 41 too, with the x32 bit; arm64's socket is 198
		amd64Socket, arm64Socket, read = 41, 198, 0
	)
	amd64 := mptcpFilter(unix.AUDIT_ARCH_X86_64, amd64Socket, true)
	for _, c := range []struct {
		name           string
		nr, arch, arg2 uint32
		want           uint32
	}{
		{"amd64 MPTCP socket", amd64Socket, unix.AUDIT_ARCH_X86_64, ipprotoMPTCP, noMPTCP},
		{"amd64 TCP socket", amd64Socket, unix.AUDIT_ARCH_X86_64, unix.IPPROTO_TCP, allow},
		{"amd64 read", read, unix.AUDIT_ARCH_X86_64, ipprotoMPTCP, allow},
		{"x32 MPTCP socket", x32SyscallBit | amd64Socket, unix.AUDIT_ARCH_X86_64, ipprotoMPTCP, noX32},
		{"x32 TCP socket", x32SyscallBit | amd64Socket, unix.AUDIT_ARCH_X86_64, unix.IPPROTO_TCP, noX32},
		{"x32 read", x32SyscallBit | read, unix.AUDIT_ARCH_X86_64, 0, noX32},
		{"i386 socket", 359, unix.AUDIT_ARCH_I386, ipprotoMPTCP, allow},
	} {
		assert.Equal(t, c.want, runFilter(t, amd64, c.nr, c.arch, c.arg2), c.name)
	}
	arm64 := mptcpFilter(unix.AUDIT_ARCH_AARCH64, arm64Socket, false)
	assert.Equal(t, uint32(noMPTCP), runFilter(t, arm64, arm64Socket, unix.AUDIT_ARCH_AARCH64, ipprotoMPTCP))
	assert.Equal(t, uint32(allow), runFilter(t, arm64, arm64Socket, unix.AUDIT_ARCH_AARCH64, unix.IPPROTO_TCP))
	assert.Equal(t, uint32(allow), runFilter(t, arm64, x32SyscallBit|amd64Socket, unix.AUDIT_ARCH_AARCH64, 0), "no x32 on arm64")
	assert.Equal(t, uint32(allow), runFilter(t, arm64, arm64Socket, unix.AUDIT_ARCH_X86_64, ipprotoMPTCP), "another arch")
}
