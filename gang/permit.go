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
// It is safe for concurrent use.
type Coscheduler struct {
	// Timeout is how long a group waits for its members; 0 means 30 s.
	Timeout time.Duration

	mu     sync.Mutex
	groups map[string]*permitGroup
}

type permitGroup struct {
	min      int
	allowed  map[string]bool
	waiting  map[string]chan bool
	deadline time.Time
	timer    *time.Timer
}

// SetGroup declares a group and the number of members it needs.
func (c *Coscheduler) SetGroup(name string, minMember int) error {
	if minMember < 1 {
		return fmt.Errorf("gang: group %q: %d members (want >= 1)", name, minMember)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups = map[string]*permitGroup{}
	}
	if _, ok := c.groups[name]; ok {
		return fmt.Errorf("gang: group %q already exists", name)
	}
	c.groups[name] = &permitGroup{min: minMember, allowed: map[string]bool{}, waiting: map[string]chan bool{}}
	return nil
}

// Permit answers for member of group: Allow, Wait (with the time left), or
// Reject for an unknown group or a member that already asked.
func (c *Coscheduler) Permit(group, member string) (PermitStatus, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[group]
	if !ok {
		return Reject, 0
	}
	if g.allowed[member] || g.waiting[member] != nil {
		return Reject, 0
	}
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
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if len(g.waiting) == 0 {
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
	if c.groups[name] != g {
		return
	}
	c.rejectLocked(g)
}

func (c *Coscheduler) rejectLocked(g *permitGroup) {
	for _, ch := range g.waiting {
		ch <- false
	}
	clear(g.waiting)
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}

// Reject rejects every waiting member of a group (as the coscheduling
// plugin does when a member fails), and the group starts over.
func (c *Coscheduler) Reject(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[group]; ok {
		c.rejectLocked(g)
	}
}

// Wait blocks a member that got Wait until it is allowed (nil), rejected
// (ErrRejected) or ctx ends.
func (c *Coscheduler) Wait(ctx context.Context, group, member string) error {
	c.mu.Lock()
	g, ok := c.groups[group]
	var ch chan bool
	if ok {
		ch = g.waiting[member]
		if ch == nil && g.allowed[member] {
			c.mu.Unlock()
			return nil
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

// Delete forgets a group (for instance when its job finished).
func (c *Coscheduler) Delete(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[group]; ok {
		c.rejectLocked(g)
		delete(c.groups, group)
	}
}
