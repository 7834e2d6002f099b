package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// A tree whose NetRules ask for LoopbackOnly runs in a network namespace
// of its own, made on the forking thread just before the fork: its only
// interface is its own loopback, so no address outside it (another host,
// the host's own addresses, the host's loopback) is reachable on any port
// or protocol (TCP, UDP and DNS, MPTCP). The runtime listens on that
// loopback at each Forward endpoint before the fork and relays every
// connection to the same endpoint on the host, from a thread in the
// host's namespace: so a model endpoint on the host's loopback stays
// reachable and nothing else does. Making a namespace needs CAP_SYS_ADMIN
// (root); where it fails, Start falls back to the TCP port rules and says
// so (Handle.Confined, LoopbackHolds).

var (
	nsProbe   sync.Once
	nsHolds   bool
	nsFailure string
)

// LoopbackHolds reports whether this process can give a tree a network
// namespace of its own (a probe, run once: unshare on a thread that is
// then thrown away), and if not, why.
func LoopbackHolds() (bool, string) {
	nsProbe.Do(func() {
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			done <- unix.Unshare(unix.CLONE_NEWNET)
		}()
		if err := <-done; err != nil {
			nsFailure = noNamespaceError{err}.Error()
			return
		}
		nsHolds = true
	})
	return nsHolds, nsFailure
}

// relay is the listeners a loopback-only tree reaches its Forward
// endpoints through; close stops them (connections under way end with
// their ends).
type relay struct {
	lns []net.Listener
}

func (r *relay) close() {
	if r == nil {
		return
	}
	for _, ln := range r.lns {
		_ = ln.Close()
	}
}

// enterLoopbackNS moves the calling (locked) thread into a new network
// namespace, brings its loopback up and listens there at each forward
// endpoint (host:port; a "localhost" endpoint on 127.0.0.1 and ::1), each
// relayed to the same endpoint on the host.
func enterLoopbackNS(forward []string) (*relay, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, noNamespaceError{err}
	}
	if err := loopbackUp(); err != nil {
		return nil, err
	}
	r := &relay{}
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	for _, target := range forward {
		host, port, err := net.SplitHostPort(target)
		if err != nil {
			r.close()
			return nil, err
		}
		hosts := []string{host}
		if host == "localhost" {
			hosts = []string{"127.0.0.1", "::1"}
		}
		for _, h := range hosts {
			// the socket is made on this thread, so in the new namespace
			ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(h, port))
			if err != nil {
				if h == "::1" && host == "localhost" {
					continue // no IPv6 loopback here
				}
				r.close()
				return nil, fmt.Errorf("listen on %s inside: %w", net.JoinHostPort(h, port), err)
			}
			r.lns = append(r.lns, ln)
			go relayFrom(ln, target)
		}
	}
	return r, nil
}

// loopbackUp sets lo up in the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

// relayFrom accepts on ln (inside) and copies each connection to and from
// target, dialled from an ordinary goroutine, whose thread is in the
// host's namespace (the namespaced thread runs only its locked goroutine
// and dies with it).
func relayFrom(ln net.Listener, target string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if c, ok := dst.(*net.TCPConn); ok {
					_ = c.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(out, in)
			go pipe(in, out)
			<-done
			<-done
		}()
	}
}

// noNamespaceError is the kernel refusing the namespace (not root, or
// namespaces off): the thread is unchanged, and Start falls back to the
// port rules. Any later failure is the start's.
type noNamespaceError struct{ err error }

func (e noNamespaceError) Error() string {
	return fmt.Sprintf("no network namespace (unshare: %v; it needs CAP_SYS_ADMIN)", e.err)
}

func (e noNamespaceError) Unwrap() error { return e.err }

// isNoNamespace reports whether err is a noNamespaceError.
func isNoNamespace(err error) bool {
	var n noNamespaceError
	return errors.As(err, &n)
}
