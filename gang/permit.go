package gang

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// PermitStatus is the answer of Coscheduler.Permit. Its values are
// constants, safe for concurrent use.
type PermitStatus int

const (
	// Allow: the member may bind now.
	Allow PermitStatus = iota
	// Wait: the member must wait (Coscheduler.Wait) for its group.
	Wait
	// Reject: the member may not bind.
	Reject
)

func (s PermitStatus) String() string {
	switch s {
	case Allow:
		return "allow"
	case Wait:
		return "wait"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("PermitStatus(%d)", int(s))
}

// Coscheduler admits the members of a group all together, in the shape of
// the Kubernetes scheduler framework's coscheduling plugin (the Permit
// extension point of kubernetes-sigs/scheduler-plugins): each member, once
// tentatively placed, asks Permit; while fewer than the group's minimum
// have asked, the answer is Wait with the time left; the member that
// completes the group is allowed, and so is every member waiting; if the
// group is not complete within its timeout, every waiting member is
// rejected, and a rejected member must release its tentative placement.
//
// After a rejection (a timeout, or [Coscheduler.Reject] when a member
// failed), the group backs off as the plugin's PodGroupBackoffSeconds
// does: for the Backoff window every member that asks is rejected at once
// instead of waiting out another timeout while holding its reservation;
// then the group gathers afresh. A deleted group's name can be declared
// again. It is safe for concurrent use.
type Coscheduler struct {
	// Timeout is how long a group waits for its members; 0 means 30 s.
	Timeout time.Duration
	// Backoff is how long a rejected group rejects its members at once;
	// 0 means 5 s, a negative value none (the group gathers again at once).
	Backoff time.Duration

	mu     sync.Mutex
	groups map[string]*permitGroup
}

type permitGroup struct {
	min      int
	allowed  map[string]bool
	waiting  map[string]chan bool
	rejected map[string]bool // rejected while waiting, not asked again since
	deadline time.Time
	timer    *time.Timer
	backoff  time.Time // members are rejected at once until then
}

func (c *Coscheduler) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 30 * time.Second
}

func (c *Coscheduler) backoff() time.Duration {
	switch {
	case c.Backoff > 0:
		return c.Backoff
	case c.Backoff < 0:
		return 0
	}
	return 5 * time.Second
}

// SetGroup declares a group and the number of members it needs. Declaring
// a group again with the same size does nothing (every member of a pod
// group may declare it); with another size it is an error wrapping
// [ErrConflict], and the group keeps its size.
func (c *Coscheduler) SetGroup(name string, minMember int) error {
	if name == "" {
		return fmt.Errorf("%w: empty group name", ErrInvalid)
	}
	if minMember < 1 {
		return fmt.Errorf("%w: group %q: %d members (want >= 1)", ErrInvalid, name, minMember)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups = map[string]*permitGroup{}
	}
	if g, ok := c.groups[name]; ok {
		if g.min != minMember {
			return fmt.Errorf("%w: %q needs %d members, declared again with %d", ErrConflict, name, g.min, minMember)
		}
		return nil
	}
	c.groups[name] = &permitGroup{min: minMember, allowed: map[string]bool{}, waiting: map[string]chan bool{}, rejected: map[string]bool{}}
	return nil
}

// Permit answers for member of group: Allow; Wait, with the time left
// before the group times out; or Reject, for an unknown group, a member
// that already asked, or a group in its backoff window, with the time
// left in the window (0 otherwise).
func (c *Coscheduler) Permit(group, member string) (PermitStatus, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[group]
	if !ok {
		return Reject, 0
	}
	if left := time.Until(g.backoff); left > 0 {
		g.rejected[member] = true
		return Reject, left
	}
	if g.allowed[member] || g.waiting[member] != nil {
		return Reject, 0
	}
	delete(g.rejected, member)
	if len(g.allowed)+len(g.waiting)+1 >= g.min {
		for m, ch := range g.waiting {
			ch <- true
			g.allowed[m] = true
		}
		clear(g.waiting)
		if g.timer != nil {
			g.timer.Stop()
			g.timer = nil
		}
		g.allowed[member] = true
		return Allow, 0
	}
	if len(g.waiting) == 0 {
		timeout := c.timeout()
		g.deadline = time.Now().Add(timeout)
		g.timer = time.AfterFunc(timeout, func() { c.expire(group, g) })
	}
	g.waiting[member] = make(chan bool, 1)
	return Wait, time.Until(g.deadline)
}

// expire rejects every waiting member of a group whose time ran out.
func (c *Coscheduler) expire(name string, g *permitGroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[name] != g || g.timer == nil {
		return // deleted, completed or rejected meanwhile
	}
	c.rejectLocked(g)
}

// rejectLocked rejects the waiting members and starts the backoff window.
func (c *Coscheduler) rejectLocked(g *permitGroup) {
	for m, ch := range g.waiting {
		ch <- false
		g.rejected[m] = true
	}
	clear(g.waiting)
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	if b := c.backoff(); b > 0 {
		g.backoff = time.Now().Add(b)
	}
}

// Reject rejects every waiting member of a group (as the coscheduling
// plugin does when a member fails) and starts the group's backoff window.
func (c *Coscheduler) Reject(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[group]; ok {
		c.rejectLocked(g)
	}
}

// Wait blocks a member that got Wait until it is allowed (nil), rejected
// (ErrRejected, also when the rejection came before Wait was called) or
// ctx ends.
func (c *Coscheduler) Wait(ctx context.Context, group, member string) error {
	c.mu.Lock()
	g, ok := c.groups[group]
	var ch chan bool
	if ok {
		ch = g.waiting[member]
		switch {
		case ch == nil && g.allowed[member]:
			c.mu.Unlock()
			return nil
		case ch == nil && g.rejected[member]:
			c.mu.Unlock()
			return fmt.Errorf("%w: %s timed out or was rejected", ErrRejected, group)
		}
	}
	c.mu.Unlock()
	if ch == nil {
		return fmt.Errorf("%w: %s/%s", ErrUnknownMember, group, member)
	}
	select {
	case ok := <-ch:
		if ok {
			return nil
		}
		return fmt.Errorf("%w: %s timed out or was rejected", ErrRejected, group)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Delete forgets a group (for instance when its job finished), rejecting
// its waiting members; the name can then be declared again.
func (c *Coscheduler) Delete(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[group]; ok {
		c.rejectLocked(g)
		delete(c.groups, group)
	}
}
