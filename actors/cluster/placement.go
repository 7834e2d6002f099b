package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/codesession/codesession/messages"
)

// candidate is a node that could take a start.
type candidate struct {
	meta  Meta
	local bool
}

// holds reports whether cwd lies under one of roots; no roots hold every
// cwd, and an empty cwd (the node's own working directory) fits anywhere.
func holds(roots []string, cwd string) bool {
	if len(roots) == 0 || cwd == "" {
		return true
	}
	cwd = filepath.Clean(cwd)
	for _, r := range roots {
		rel, err := filepath.Rel(r, cwd)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// place picks the node for a start: the one named (it must be live and fit),
// else the least loaded live node whose roots hold cwd and that has the
// backend. Ties go to this node, then to the smaller id. A node that
// gossips Leaving is passed over: it is in its last moments (Close waits
// up to leavingTimeout before its leave), and a session placed there would
// be orphaned at once. No fit is an invalid error that says why each node
// was passed over.
func (n *Node) place(op messages.Start, backend, named string) (candidate, error) {
	self := n.Meta()
	cands := []candidate{{meta: self, local: true}}
	n.mu.Lock()
	var unverified, leaving []string
	for id, p := range n.peers {
		switch {
		case p.state == PeerDead:
		case p.meta.Leaving:
			leaving = append(leaving, id)
		case !p.verified:
			unverified = append(unverified, id)
		default:
			cands = append(cands, candidate{meta: p.meta})
		}
	}
	n.mu.Unlock()
	var why []string
	var fit []candidate
	for _, c := range cands {
		switch {
		case named != "" && c.meta.ID != named:
		case !slices.Contains(c.meta.Backends, backend):
			why = append(why, fmt.Sprintf("%s has no available backend %q (it has %s)", c.meta.ID, backend, strings.Join(c.meta.Backends, ", ")))
		case !holds(c.meta.Roots, op.Cwd):
			why = append(why, fmt.Sprintf("%s holds no workspace root containing %s (its roots: %s)", c.meta.ID, op.Cwd, strings.Join(c.meta.Roots, ", ")))
		default:
			fit = append(fit, c)
		}
	}
	if len(fit) == 0 {
		field := "cwd"
		if named != "" {
			field = "node"
			if !slices.ContainsFunc(cands, func(c candidate) bool { return c.meta.ID == named }) {
				msg := fmt.Sprintf("node %q is not a live member of the cluster", named)
				if slices.Contains(unverified, named) {
					msg = fmt.Sprintf("node %q has not answered over the wire yet", named)
				}
				if slices.Contains(leaving, named) {
					msg = fmt.Sprintf("node %q is leaving the cluster", named)
				}
				return candidate{}, messages.FieldError(messages.OpStart, field, "%s", msg)
			}
		}
		slices.Sort(why)
		return candidate{}, messages.FieldError(messages.OpStart, field, "no node can take this session: %s", strings.Join(why, "; "))
	}
	slices.SortStableFunc(fit, func(a, b candidate) int {
		if a.meta.Load != b.meta.Load {
			return a.meta.Load - b.meta.Load
		}
		if a.local != b.local {
			if a.local {
				return -1
			}
			return 1
		}
		return strings.Compare(a.meta.ID, b.meta.ID)
	})
	return fit[0], nil
}

// Placed is a start's result with the node that took it.
type Placed struct {
	messages.StartResult
	Node string `json:"node"`
}

// Start places a session (on the node named, when node is set) and starts
// it there. The cwd must be absolute: it is a path on the chosen node.
func (n *Node) Start(ctx context.Context, op messages.Start, node string) (Placed, error) {
	if err := op.Validate(); err != nil {
		return Placed{}, err
	}
	if op.Cwd != "" && !filepath.IsAbs(op.Cwd) {
		return Placed{}, messages.FieldError(messages.OpStart, "cwd", "must be an absolute path (it is a path on the node that runs the session)")
	}
	backend := op.Backend
	if backend == "" {
		backend = n.defaultBackend()
	}
	c, err := n.place(op, backend, node)
	if err != nil {
		return Placed{}, err
	}
	if c.local {
		res, err := n.cfg.Runtime.Start(ctx, n.scopeOf(ctx), op)
		return Placed{StartResult: res, Node: n.cfg.NodeID}, err
	}
	var res messages.StartResult
	if err := n.call(ctx, c.meta.ID, messages.OpStart, op, &res, 0); err != nil {
		return Placed{}, err
	}
	n.mu.Lock()
	n.owner[res.SessionID] = c.meta.ID
	n.mu.Unlock()
	// list the node now: should it die before the next sync, this node
	// still knows the record it has to show orphaned
	n.refresh(c.meta.ID)
	return Placed{StartResult: res, Node: c.meta.ID}, nil
}
