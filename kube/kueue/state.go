package kueue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpusched/gpusched/kube/internal/blobstore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// What the estimator learned, across restarts. With Config.StateNamespace
// and an Estimator that can be saved (Snapshot and Restore:
// *learn.Learner), the controller keeps the estimator's snapshot and the
// UIDs of the Workloads it learns in a ConfigMap (Config.StateName,
// gzip'd, chunked beyond 900 KiB, in the admission controller's layout:
// kube/internal/blobstore), at most every Config.SaveInterval while it
// runs and once as Run ends; Start restores it before the first round, so
// that a restarted controller (or the next leader) steers a program's
// next runs by what its earlier runs measured. Workloads that finished
// while no controller ran are forgotten at the first round (their rows
// join the population); one made again under the same name (another UID)
// starts afresh.

// DefaultStateName is Config.StateName's default.
const DefaultStateName = "gpusched-kueue-state"

// DefaultSaveInterval is Config.SaveInterval's default.
const DefaultSaveInterval = time.Minute

// ReasonLearnerState (Warning, on the state ConfigMap): what the
// estimator learned could not be restored (corrupt, or beyond the
// estimator's Config), so it learns afresh; or it is too large to save.
// The admission controller's reason of the same name.
const ReasonLearnerState = "GPUSchedLearnerState"

// learnedVersion is the version of learnedDoc.
const learnedVersion = 1

// maxSavedWorkloads bounds a saved document's Workloads.
const maxSavedWorkloads = 1 << 20

// learnedDoc is the saved document.
type learnedDoc struct {
	Version int `json:"version"`
	// Learner is the estimator's snapshot.
	Learner json.RawMessage `json:"learner"`
	// Workloads are the UIDs of the Workloads registered, by key.
	Workloads map[string]types.UID `json:"workloads,omitempty"`
	// Restarts are the restarts in place of each Workload's admission
	// (its segment's number in the estimator: the reservation's second
	// and the restarts), by key.
	Restarts map[string]savedRestarts `json:"restarts,omitempty"`
}

// savedRestarts is a restartCount.
type savedRestarts struct {
	Segment  uint64 `json:"segment"`
	Restarts uint64 `json:"restarts"`
}

// learnerState is an estimator whose state can be saved and restored
// (*learn.Learner is one).
type learnerState interface {
	Snapshot() ([]byte, error)
	Restore(data []byte) error
}

// saving is the state of the saves (under Controller.mu).
type saving struct {
	store *blobstore.Store
	ls    learnerState
	at    time.Time // the last save's, or the restore's
	sum   [32]byte  // the hash of the last document saved or restored
	// tooLarge: the last save was refused as too large (said once).
	tooLarge bool
	// loaded: Start tried the restore (a save before it would replace
	// what was saved with what an empty estimator holds).
	loaded bool
}

// newSaving returns the saves' state, nil where nothing is saved.
func newSaving(cfg *Config) *saving {
	ls, ok := cfg.Estimator.(learnerState)
	if !ok || cfg.StateNamespace == "" {
		return nil
	}
	return &saving{ls: ls, store: stateStore(cfg.Client, cfg.StateNamespace, cfg.StateName)}
}

// stateChunks bounds the chunks of what was learned: 8 of 900 KiB
// compressed, about 25 MiB of the estimator's snapshot (13,000 active
// jobs measured on 8 types, learning.md's sizes); beyond, it is not
// saved (ReasonLearnerState).
const stateChunks = 8

// stateStore is where the controller keeps what it learned.
func stateStore(client kubernetes.Interface, namespace, name string) *blobstore.Store {
	if name == "" {
		name = DefaultStateName
	}
	return &blobstore.Store{Client: client, Namespace: namespace, Name: name, ManagedBy: "gpusched-kueue", MaxChunks: stateChunks}
}

// StateConfigMaps lists the ConfigMaps the controller may write to keep
// what it learned under Config.StateName name ("": DefaultStateName): the
// head and its chunks, for an RBAC Role's resourceNames
// (kube/deploy/learning.yaml).
func StateConfigMaps(name string) []string { return stateStore(nil, "", name).Names() }

// restoreLearned loads what a previous controller saved into the
// estimator (Start, before the first round). A document that cannot be
// read or restored is a Warning event ReasonLearnerState and the
// estimator learns afresh; an account that may not read the ConfigMap
// (Forbidden) keeps nothing, with the same Warning; the API's other
// errors are returned (Start fails: a state that could not be read
// must not be replaced).
func (c *Controller) restoreLearned(ctx context.Context) error {
	sv := c.saves
	if sv == nil {
		return nil
	}
	data, err := sv.store.Load(ctx)
	if apierrors.IsForbidden(err) {
		c.log.Warn("the state ConfigMap may not be read: what is learned is not kept across restarts", "configmap", sv.store.Where(), "err", err)
		c.stateEvent(fmt.Sprintf("what is learned is not kept across restarts: this controller's account may not read the ConfigMap (kube/deploy/learning.yaml grants it): %v", err))
		c.saves = nil
		return nil
	}
	if err != nil && !errors.Is(err, blobstore.ErrCorrupt) {
		return fmt.Errorf("kueue: reading what was learned, %s: %w", sv.store.Where(), err)
	}
	sv.at, sv.loaded = c.now(), true
	if err == nil && data == nil {
		return nil
	}
	var doc learnedDoc
	if err == nil {
		doc, err = readLearned(data)
	}
	if err == nil {
		err = restoreSafely(sv.ls, doc.Learner)
	}
	if err != nil {
		c.log.Warn("what the estimator learned cannot be restored: learning afresh", "configmap", sv.store.Where(), "err", err)
		c.stateEvent(fmt.Sprintf("what the estimator learned cannot be restored, learning afresh (the next save replaces it): %v", err))
		return nil
	}
	c.learn.mu.Lock()
	for k, uid := range doc.Workloads {
		c.learn.keys[k] = learnedKey{uid: uid, round: c.rounds}
	}
	for k, r := range doc.Restarts {
		if _, ok := doc.Workloads[k]; ok {
			c.learn.restarts[k] = restartCount{seg: r.Segment, n: r.Restarts}
		}
	}
	c.learn.mu.Unlock()
	sv.sum = sha256.Sum256(data)
	c.log.Info("what the estimator learned is restored", "configmap", sv.store.Where(), "bytes", len(data), "workloads", len(doc.Workloads))
	return nil
}

// readLearned parses a saved document and checks its bounds (the
// estimator checks its own snapshot).
func readLearned(data []byte) (learnedDoc, error) {
	var doc learnedDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return doc, fmt.Errorf("the saved document: %w", err)
	}
	switch {
	case doc.Version != learnedVersion:
		return doc, fmt.Errorf("the saved document's version %d (want %d)", doc.Version, learnedVersion)
	case len(doc.Workloads) > maxSavedWorkloads || len(doc.Restarts) > maxSavedWorkloads:
		return doc, fmt.Errorf("the saved document has %d workloads and %d restart counts (at most %d)", len(doc.Workloads), len(doc.Restarts), maxSavedWorkloads)
	case len(doc.Learner) == 0 || string(doc.Learner) == "null":
		return doc, errors.New("the saved document has no estimator's snapshot")
	}
	for k, uid := range doc.Workloads {
		ns, name, ok := strings.Cut(k, "/")
		if !ok || ns == "" || name == "" || len(k) > 317 || uid == "" || len(uid) > 128 {
			return doc, fmt.Errorf("the saved document's workload %.80q (UID %.40q)", k, uid)
		}
	}
	for k, r := range doc.Restarts {
		if r.Restarts >= maxRestarts || r.Segment > math.MaxUint64/maxRestarts-1 {
			return doc, fmt.Errorf("the saved document's workload %.80q: %d restarts in segment %d (at most %d)", k, r.Restarts, r.Segment, maxRestarts-1)
		}
	}
	return doc, nil
}

// restoreSafely restores ls from snap; a panic in it (a bug) is an error.
func restoreSafely(ls learnerState, snap []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("restoring the estimator's snapshot panicked: %v", r)
		}
	}()
	return ls.Restore(snap)
}

// Save writes what the estimator learned to the state ConfigMap
// (Config.StateNamespace), unless it is what was last saved or
// restored; Run calls it after a round once Config.SaveInterval has
// passed since the last save (or try) and as it ends; an embedder that
// runs its own rounds may call it at any time after Start (before,
// it does nothing: Start restores first). A
// document too large to save (8 chunks of 900 KiB compressed) is not saved: a
// Warning event ReasonLearnerState says so once, and Save returns nil.
// Without a state namespace or an estimator that can be saved it does
// nothing. Safe for concurrent use (it waits for a round in progress).
func (c *Controller) Save(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.save(ctx)
}

func (c *Controller) save(ctx context.Context) error {
	sv := c.saves
	if sv == nil || !sv.loaded {
		return nil
	}
	// Under the learning mutex, so that no report falls between the
	// snapshot and the restart counts.
	c.learn.mu.Lock()
	snap, err := sv.ls.Snapshot()
	if err != nil {
		c.learn.mu.Unlock()
		return fmt.Errorf("kueue: the estimator's snapshot: %w", err)
	}
	doc := learnedDoc{Version: learnedVersion, Learner: snap, Workloads: map[string]types.UID{}}
	for k, v := range c.learn.keys {
		doc.Workloads[k] = v.uid
	}
	for k, r := range c.learn.restarts {
		if r.n > 0 {
			if doc.Restarts == nil {
				doc.Restarts = map[string]savedRestarts{}
			}
			doc.Restarts[k] = savedRestarts{Segment: r.seg, Restarts: r.n}
		}
	}
	c.learn.mu.Unlock()
	data, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("kueue: what was learned: %w", err)
	}
	sv.at = c.now()
	sum := sha256.Sum256(data)
	if sum == sv.sum {
		return nil
	}
	err = sv.store.Save(ctx, data)
	if errors.Is(err, blobstore.ErrTooLarge) {
		if !sv.tooLarge {
			sv.tooLarge = true
			c.log.Warn("what the estimator learned is too large to save", "bytes", len(data), "err", err)
			c.stateEvent(fmt.Sprintf("what the estimator learned is not saved (%d bytes; a restart would learn afresh): %v", len(data), err))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("kueue: saving what was learned: %w", err)
	}
	sv.sum, sv.tooLarge = sum, false
	return nil
}

// saveDue saves when Config.SaveInterval has passed since the last save
// or try (Run, after a round); a failure is logged and tried again an
// interval later.
func (c *Controller) saveDue(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.saves == nil || c.now().Sub(c.saves.at) < c.cfg.SaveInterval {
		return
	}
	if err := c.save(ctx); err != nil {
		c.log.Warn("saving what the estimator learned failed; trying again later", "err", err)
	}
}

// stateEvent records a Warning ReasonLearnerState on the state ConfigMap.
func (c *Controller) stateEvent(msg string) {
	st := c.saves.store
	c.cfg.Recorder.Event(&corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: st.Namespace, Name: st.Name},
		corev1.EventTypeWarning, ReasonLearnerState, msg)
}
