package admission

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The saved state. The head ConfigMap (Config.StateName in
// Config.StateNamespace) holds stateKeyHead, a small JSON header, and,
// when the compressed state fits, the state itself (stateKeyBlob); a
// larger state is split over chunk ConfigMaps name-<slot>-<i>, written
// before the head that names them, in one of two slots taken in turn, so
// that a save cut short leaves the last complete state in place. The
// state is one gzip'd JSON document: the controller's records (ctrlState),
// the core's Snapshot and, with an Estimator that can be saved
// (learnerState: *learn.Learner), the estimator's snapshot. What tenants
// write reaches it only bounded:
// job keys (object names), at most Tenancy.MaxJobs jobs, rates rounded to
// four digits on the cluster's types, records of the admitted workloads
// (at most one per GPU); a preempted pod's gated copy goes to a ConfigMap
// of its own (requeueName), at most maxPodCopy bytes; the estimator's
// snapshot is bounded by its own Config (learn.Config's MaxJobs,
// MaxTracks, MaxWindows, MaxHistory), and a state that would not fit the
// caps with it is saved without it (ReasonLearnerState). Saving therefore
// never fails for what tenants write.
const (
	stateKeyHead  = "head.json"
	stateKeyBlob  = "state.json.gz"
	chunkKey      = "part"
	requeueKey    = "pod.json"
	stateVersion  = 2
	labelStateOf  = "gpusched.io/state-of"
	labelStateGen = "gpusched.io/state-generation"
	// maxChunks bounds the chunks, maxStateBytes the uncompressed state.
	maxChunks     = 64
	maxStateBytes = 256 << 20
	// maxRecords bounds the records and requeued pods a state may hold.
	maxRecords = 1 << 20
	// maxPodCopy bounds a preempted pod's gated copy: a pod larger than
	// this is not admitted (it could not be created again).
	maxPodCopy = 768 << 10
)

// inlineMax is the largest compressed state kept in the head; chunkMax
// the size of a chunk (a ConfigMap holds at most 1 MiB). Variables for
// tests only.
var inlineMax, chunkMax = 900 << 10, 900 << 10

// ctrlState is what the controller keeps beside the core's snapshot.
type ctrlState struct {
	Version int `json:"version"`
	// Rounds counts the rounds run.
	Rounds int `json:"rounds"`
	// Admitted holds the controller's records of the workloads it
	// admitted, by key: the only source of what runs where (annotations
	// on the objects are for people, never read back).
	Admitted map[string]*record `json:"admitted,omitempty"`
	// Requeue holds preempted bare pods to create again, gated, once the
	// deleted ones are gone, by workload key.
	Requeue map[string][]requeued `json:"requeue,omitempty"`
	// Report is the core's report of the last round, written at its
	// start and sent when it is over (reportLast), nil once sent.
	Report *scheduler.RoundReport `json:"report,omitempty"`
}

// record is the controller's record of an admitted workload.
type record struct {
	Type topology.GPUType `json:"type"`
	// UIDs are the admitted objects' (the Job, or the pods).
	UIDs []types.UID `json:"uids"`
	// Pods names the admitted pods (UIDs in the same order), for the
	// sweep of preemption graces.
	Pods []string `json:"pods,omitempty"`
	NS   string   `json:"ns"`
	// DeleteAfter is the RFC 3339 time after which the preempted pods are
	// deleted; "" while admitted.
	DeleteAfter string `json:"delete_after,omitempty"`
	// Adopted: found running at a clean start, not admitted by this
	// controller.
	Adopted bool `json:"adopted,omitempty"`
}

func (r *record) has(uid types.UID) bool { return r != nil && slices.Contains(r.UIDs, uid) }

// requeued is a preempted pod waiting to be created again: its gated copy
// is in the ConfigMap Copy.
type requeued struct {
	NS   string    `json:"ns"`
	Name string    `json:"name"`
	Old  types.UID `json:"old"`
	Copy string    `json:"copy"`
}

// stateHead is the head ConfigMap's header.
type stateHead struct {
	Version int    `json:"version"`
	Gen     int64  `json:"gen"`
	Chunks  int    `json:"chunks"`
	Bytes   int    `json:"bytes"`
	SHA256  string `json:"sha256"`
}

// stateDoc is the saved state, before compression.
type stateDoc struct {
	Controller ctrlState       `json:"controller"`
	Scheduler  json.RawMessage `json:"scheduler"`
	// Learner is the estimator's snapshot (learnerState), absent without
	// one (no Config.Estimator, one that cannot be saved, a state saved
	// before estimators were, or one too large to keep it).
	Learner json.RawMessage `json:"learner,omitempty"`
}

// learnerState is an estimator whose state can be saved and restored
// (*learn.Learner is one): Config.Estimator is saved with the state only
// if it is one.
type learnerState interface {
	Snapshot() ([]byte, error)
	Restore(data []byte) error
}

// learner returns the estimator if its state can be saved, else nil.
func (c *Controller) learner() learnerState {
	ls, _ := c.cfg.Estimator.(learnerState)
	return ls
}

func newCtrlState() ctrlState {
	return ctrlState{Version: stateVersion, Admitted: map[string]*record{}, Requeue: map[string][]requeued{}}
}

// load restores the state a previous controller saved. No state is a
// clean start (fresh reports it). A state that cannot be read is an error
// wrapping ErrState; New reports it and starts clean.
func (c *Controller) load(ctx context.Context) (fresh bool, err error) {
	ns, name := c.cfg.stateLocation()
	cms := c.cfg.Client.CoreV1().ConfigMaps(ns)
	head, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("admission: reading state %s/%s: %w", ns, name, err)
	}
	chunk := func(slot int64, i int) ([]byte, error) {
		cm, err := cms.Get(ctx, chunkName(name, slot, i), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if cm.Labels[labelStateOf] != name {
			return nil, fmt.Errorf("chunk %s is not of state %s", cm.Name, name)
		}
		return cm.BinaryData[chunkKey], nil
	}
	doc, h, err := decodeState(head.Data, head.BinaryData, chunk)
	if err != nil {
		return false, fmt.Errorf("%w: %s/%s: %w", ErrState, ns, name, err)
	}
	// The estimator first, then the core (scheduler/learn.go); a core
	// that cannot be restored takes the estimator's state back with it
	// (a clean start is clean).
	undo := c.restoreLearner(doc.Learner)
	if err := c.restore(doc.Scheduler); err != nil {
		undo()
		return false, fmt.Errorf("%w: %s/%s: %w", ErrState, ns, name, err)
	}
	st := doc.Controller
	c.state, c.gen = st, h.Gen
	c.slotChunks, c.chunksKnown = [2]int{}, false // the next save lists them
	c.log.Info("state restored", "configmap", ns+"/"+name, "rounds", st.Rounds, "jobs", len(c.sched.Jobs()), "bytes", h.Bytes)
	return false, nil
}

// restoreLearner loads the estimator's saved snapshot, if there is one
// and the estimator can be saved (learnerState). One that it refuses (a
// *learn.Error of kind learn.ErrMalformedSnapshot: corrupt, of another
// version, or beyond this estimator's Config) leaves the estimator as it
// was, to learn afresh: a Warning event ReasonLearnerState on the state
// ConfigMap and a log line say so; the controller's records and the core
// are restored all the same. It returns what puts the estimator back as
// it was before.
func (c *Controller) restoreLearner(snap json.RawMessage) (undo func()) {
	undo = func() {}
	ls := c.learner()
	if len(snap) == 0 || string(snap) == "null" {
		return undo
	}
	if ls == nil {
		c.log.Info("the saved state holds what an estimator learned; this controller has none (--learn) or one that cannot be restored: not restored")
		return undo
	}
	before, err := ls.Snapshot()
	if err == nil {
		err = restoreSafely(ls, snap)
	}
	if err != nil {
		ns, name := c.cfg.stateLocation()
		c.log.Warn("the estimator's saved state cannot be restored: learning afresh", "configmap", ns+"/"+name, "err", err)
		c.eventOn(corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: name}, corev1.EventTypeWarning, ReasonLearnerState,
			fmt.Sprintf("what the estimator learned cannot be restored, learning afresh (the admissions and the core's state are restored; the next save replaces it): %v", err))
		return undo
	}
	c.log.Info("estimator state restored", "bytes", len(snap))
	return func() {
		if err := restoreSafely(ls, before); err != nil {
			c.log.Warn("the estimator's state before the restore cannot be put back", "err", err)
		}
	}
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

// restore loads the core's snapshot into the core built for the cluster
// and tenancy as they are now (Adopt: nodes may have come and gone, the
// tenancy changed; leases on GPUs gone are released, and a changed
// configuration makes the policy solve again); a panic in it (which would
// be a bug) is an error, so that no saved state can crash the controller.
func (c *Controller) restore(snap []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("restoring the scheduler's snapshot panicked: %v", r)
		}
	}()
	ad, err := c.sched.Adopt(snap)
	if err != nil {
		return err
	}
	if len(ad.Differences) > 0 || len(ad.Released) > 0 {
		c.log.Info("scheduler state adopted", "differences", len(ad.Differences), "released", ad.Released, "resolve", ad.Reset)
	}
	return nil
}

// decodeState reads a saved state: the head's header, the compressed
// state inline or in chunks (chunk reads them), checked against the
// header's size and hash, and the controller's records checked against
// their bounds. It never panics on any input. The core's and the
// estimator's snapshots are checked as they are restored.
func decodeState(data map[string]string, bin map[string][]byte, chunk func(slot int64, i int) ([]byte, error)) (stateDoc, stateHead, error) {
	var h stateHead
	raw, ok := data[stateKeyHead]
	if !ok {
		return stateDoc{}, h, errors.New("no " + stateKeyHead + " (a state of another format)")
	}
	if err := strictJSON([]byte(raw), &h); err != nil {
		return stateDoc{}, h, fmt.Errorf("%s: %w", stateKeyHead, err)
	}
	switch {
	case h.Version != stateVersion:
		return stateDoc{}, h, fmt.Errorf("state version %d (this controller reads %d)", h.Version, stateVersion)
	case h.Chunks < 0 || h.Chunks > maxChunks:
		return stateDoc{}, h, fmt.Errorf("%d chunks (at most %d)", h.Chunks, maxChunks)
	case h.Bytes < 0 || h.Bytes > maxChunks*chunkMax:
		return stateDoc{}, h, fmt.Errorf("%d bytes", h.Bytes)
	case h.Gen < 0 || h.Gen > maxGen:
		return stateDoc{}, h, fmt.Errorf("generation %d (from 0 to %d)", h.Gen, int64(maxGen))
	}
	var gz []byte
	if h.Chunks == 0 {
		gz = bin[stateKeyBlob]
	} else {
		for i := range h.Chunks {
			part, err := chunk(h.Gen%2, i)
			if err != nil {
				return stateDoc{}, h, fmt.Errorf("chunk %d: %w", i, err)
			}
			if len(gz)+len(part) > h.Bytes {
				return stateDoc{}, h, fmt.Errorf("chunks longer than the %d bytes the head says", h.Bytes)
			}
			gz = append(gz, part...)
		}
	}
	if len(gz) != h.Bytes {
		return stateDoc{}, h, fmt.Errorf("%d bytes of state, the head says %d", len(gz), h.Bytes)
	}
	if sum := sha256.Sum256(gz); hex.EncodeToString(sum[:]) != h.SHA256 {
		return stateDoc{}, h, errors.New("the state's hash does not match the head's")
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return stateDoc{}, h, fmt.Errorf("gzip: %w", err)
	}
	plain, err := io.ReadAll(io.LimitReader(zr, maxStateBytes+1))
	if err != nil {
		return stateDoc{}, h, fmt.Errorf("gzip: %w", err)
	}
	if len(plain) > maxStateBytes {
		return stateDoc{}, h, fmt.Errorf("more than %d bytes uncompressed", maxStateBytes)
	}
	var doc stateDoc
	if err := strictJSON(plain, &doc); err != nil {
		return stateDoc{}, h, err
	}
	if err := doc.Controller.check(); err != nil {
		return stateDoc{}, h, err
	}
	if doc.Controller.Admitted == nil {
		doc.Controller.Admitted = map[string]*record{}
	}
	if doc.Controller.Requeue == nil {
		doc.Controller.Requeue = map[string][]requeued{}
	}
	return doc, h, nil
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON document")
	}
	return nil
}

// check bounds what a state holds.
func (st *ctrlState) check() error {
	switch {
	case st.Version != stateVersion:
		return fmt.Errorf("controller state version %d", st.Version)
	case st.Rounds < 0:
		return fmt.Errorf("%d rounds", st.Rounds)
	case len(st.Admitted) > maxRecords || len(st.Requeue) > maxRecords:
		return fmt.Errorf("%d records, %d requeued workloads (at most %d)", len(st.Admitted), len(st.Requeue), maxRecords)
	case st.Report != nil && len(st.Report.Ran)+len(st.Report.Failed)+len(st.Report.Held) > maxRecords:
		return fmt.Errorf("a report of %d jobs (at most %d)", len(st.Report.Ran)+len(st.Report.Failed)+len(st.Report.Held), maxRecords)
	}
	for key, r := range st.Admitted {
		switch {
		case r == nil:
			return fmt.Errorf("record %q is null", cut(key))
		case len(key) > 2*maxName:
			return fmt.Errorf("record key of %d bytes", len(key))
		case r.Type.Validate() != nil:
			return fmt.Errorf("record %q: type %q", cut(key), cut(string(r.Type)))
		case len(r.UIDs) == 0 || len(r.UIDs) > model.MaxGroupMembers || len(r.Pods) > len(r.UIDs):
			return fmt.Errorf("record %q: %d objects, %d pods", cut(key), len(r.UIDs), len(r.Pods))
		case len(r.NS) > maxName:
			return fmt.Errorf("record %q: namespace of %d bytes", cut(key), len(r.NS))
		}
		for _, p := range r.Pods {
			if len(p) > maxName {
				return fmt.Errorf("record %q: pod name of %d bytes", cut(key), len(p))
			}
		}
	}
	n := 0
	for key, rs := range st.Requeue {
		n += len(rs)
		if len(key) > 2*maxName || n > maxRecords {
			return fmt.Errorf("requeue entry %q", cut(key))
		}
		for _, r := range rs {
			if len(r.NS) > maxName || len(r.Name) > maxName || len(r.Copy) > maxName {
				return fmt.Errorf("requeue entry %q: names too long", cut(key))
			}
		}
	}
	return nil
}

// maxName bounds a Kubernetes object name.
const maxName = 253

// save writes the controller's records, the core's snapshot and the
// estimator's (learnerState).
func (c *Controller) save(ctx context.Context) error {
	snap, err := c.sched.Snapshot()
	if err != nil {
		return fmt.Errorf("admission: snapshot: %w", err)
	}
	doc := stateDoc{Controller: c.state, Scheduler: snap}
	if ls := c.learner(); ls != nil {
		if doc.Learner, err = ls.Snapshot(); err != nil {
			return fmt.Errorf("admission: the estimator's snapshot: %w", err)
		}
	}
	gz, err := encodeState(doc)
	if errors.Is(err, errStateTooLarge) && doc.Learner != nil {
		c.learnerTooLarge(len(doc.Learner), err)
		doc.Learner = nil
		gz, err = encodeState(doc)
	} else if err == nil {
		c.learnerDropped = false
	}
	if err != nil {
		return err
	}
	ns, name := c.cfg.stateLocation()
	if c.genUnsure {
		if err := c.readGen(ctx); err != nil {
			return err
		}
	}
	sum := sha256.Sum256(gz)
	h := stateHead{Version: stateVersion, Gen: c.gen + 1, Bytes: len(gz), SHA256: hex.EncodeToString(sum[:])}
	head := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "gpusched-admission"}}}
	if len(gz) <= inlineMax {
		head.BinaryData = map[string][]byte{stateKeyBlob: gz}
	} else {
		for i := 0; i*chunkMax < len(gz); i++ {
			part := gz[i*chunkMax : min(len(gz), (i+1)*chunkMax)]
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: chunkName(name, h.Gen%2, i), Namespace: ns,
				Labels: map[string]string{labelStateOf: name, labelStateGen: strconv.FormatInt(h.Gen, 10)}},
				BinaryData: map[string][]byte{chunkKey: part}}
			// Counted before the write: one that fails may have landed.
			c.slotChunks[h.Gen%2] = max(c.slotChunks[h.Gen%2], i+1)
			if err := c.put(ctx, cm); err != nil {
				c.chunksKnown = false
				return err
			}
			h.Chunks++
		}
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return err
	}
	head.Data = map[string]string{stateKeyHead: string(hj)}
	if err := c.put(ctx, head); err != nil {
		c.chunksKnown, c.genUnsure = false, true
		return err
	}
	c.saves++
	if c.saves%listChunksEvery == 0 {
		c.chunksKnown = false // another writer's (a leader handing over) too
	}
	var clean bool
	if c.chunksKnown {
		clean = c.dropKnownChunks(ctx, name, h)
	} else {
		clean = c.dropChunks(ctx, name, h)
	}
	if clean {
		slot := h.Gen % 2
		c.slotChunks[slot], c.slotChunks[1-slot] = h.Chunks, 0
	}
	c.chunksKnown = clean
	c.gen = h.Gen
	return nil
}

// errStateTooLarge is wrapped by encodeState's error for a state beyond
// the caps a load reads (maxStateBytes, maxChunks).
var errStateTooLarge = errors.New("too large")

// encodeState compresses a state, or refuses one a load would refuse
// (an error wrapping ErrState and errStateTooLarge).
func encodeState(doc stateDoc) ([]byte, error) {
	plain, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("admission: state: %w", err)
	}
	if len(plain) > maxStateBytes {
		return nil, fmt.Errorf("%w: %d bytes of state exceed %d: %w", ErrState, len(plain), maxStateBytes, errStateTooLarge)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(plain); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > maxChunks*chunkMax {
		return nil, fmt.Errorf("%w: %d bytes of compressed state exceed %d chunks: %w", ErrState, buf.Len(), maxChunks, errStateTooLarge)
	}
	return buf.Bytes(), nil
}

// learnerTooLarge says, once until a save keeps the estimator's snapshot
// again, that the state is saved without it: a restart would learn
// afresh.
func (c *Controller) learnerTooLarge(n int, err error) {
	if c.learnerDropped {
		return
	}
	c.learnerDropped = true
	ns, name := c.cfg.stateLocation()
	c.log.Warn("the state is saved without the estimator's snapshot: too large", "learner_bytes", n, "err", err)
	c.eventOn(corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: name}, corev1.EventTypeWarning, ReasonLearnerState,
		fmt.Sprintf("the state is saved without what the estimator learned (%d bytes; a restart would learn afresh): %v", n, err))
}

// readGen reads the generation of the head in the API after a head write
// that failed: if the write landed after all, the head names the slot of
// generation c.gen+1, which the next save must not write (a crash in the
// middle of that save would leave a head whose chunks do not match it,
// and the next start would discard the state). Whatever generation the
// head has (this process's, a landed write's, a former leader's), the
// next save's goes past it into the other slot. A head that is missing or
// unreadable leaves c.gen as it is (the next save replaces it). A failed
// write still in flight that lands after this read is not covered: the
// client's timeout must outlast the server's.
func (c *Controller) readGen(ctx context.Context) error {
	ns, name := c.cfg.stateLocation()
	cm, err := c.cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("admission: reading the generation of state %s/%s: %w", ns, name, err)
	default:
		var h stateHead
		if raw, ok := cm.Data[stateKeyHead]; ok && strictJSON([]byte(raw), &h) == nil && h.Gen >= 0 && h.Gen <= maxGen {
			c.gen = nextGenAfter(c.gen, h.Gen) - 1
		}
	}
	c.genUnsure = false
	return nil
}

// nextGenAfter returns the generation of the next save after this
// process's last (own) when the head in the API is at live: past both,
// and in the slot live does not name.
func nextGenAfter(own, live int64) int64 {
	next := max(own, live) + 1
	if next%2 == live%2 {
		next++
	}
	return next
}

// maxGen bounds a state's generation, so that counting on from one read
// cannot overflow.
const maxGen = 1 << 62

// listChunksEvery is how often (in saves) a save lists the state's
// chunks, where it otherwise deletes those it knows by name: chunks a
// former leader wrote while handing over are deleted within as many
// rounds.
const listChunksEvery = 16

// dropKnownChunks deletes, by name, the chunks this process knows exist
// that the head h does not name: the other slot's (the save before) and
// those of h's slot past h's count. It sends no List (after a save's
// dropChunks, only this process writes chunks, but for a leader handing
// over: see listChunksEvery). It reports whether every delete succeeded;
// if not, the next save lists them.
func (c *Controller) dropKnownChunks(ctx context.Context, name string, h stateHead) bool {
	ns, _ := c.cfg.stateLocation()
	cms := c.cfg.Client.CoreV1().ConfigMaps(ns)
	slot := h.Gen % 2
	ok := true
	drop := func(slot int64, from int) {
		for i := from; i < c.slotChunks[slot]; i++ {
			ok = c.dropChunk(ctx, cms, chunkName(name, slot, i)) && ok
		}
	}
	drop(slot, h.Chunks)
	drop(1-slot, 0)
	return ok
}

// dropChunk deletes one chunk (gone already is fine) and forgets its
// written copy; it reports whether the chunk is gone.
func (c *Controller) dropChunk(ctx context.Context, cms typedcorev1.ConfigMapInterface, name string) bool {
	delete(c.written, name)
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		c.log.Warn("deleting a state chunk", "configmap", name, "err", err)
		return false
	}
	return true
}

// put creates or replaces a ConfigMap of the state. It updates the copy
// it wrote last (one request); only when it has none, or another writer
// changed it since, does it read the ConfigMap first.
func (c *Controller) put(ctx context.Context, cm *corev1.ConfigMap) error {
	cms := c.cfg.Client.CoreV1().ConfigMaps(cm.Namespace)
	if c.written == nil {
		c.written = map[string]*corev1.ConfigMap{}
	}
	if last := c.written[cm.Name]; last != nil {
		cur := last.DeepCopy()
		cur.Labels, cur.Data, cur.BinaryData = cm.Labels, cm.Data, cm.BinaryData
		out, err := cms.Update(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			c.written[cm.Name] = stripData(out)
			return nil
		}
		delete(c.written, cm.Name)
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("admission: saving state %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	cur, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
	var out *corev1.ConfigMap
	switch {
	case apierrors.IsNotFound(err):
		out, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	case err == nil:
		cur = cur.DeepCopy()
		cur.Labels, cur.Data, cur.BinaryData = cm.Labels, cm.Data, cm.BinaryData
		out, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("admission: saving state %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	if len(c.written) < 2*maxChunks+2 {
		c.written[cm.Name] = stripData(out)
	}
	return nil
}

// stripData keeps a written ConfigMap's metadata (its resource version),
// not its data.
func stripData(cm *corev1.ConfigMap) *corev1.ConfigMap {
	if cm == nil {
		return nil
	}
	return &corev1.ConfigMap{ObjectMeta: cm.ObjectMeta}
}

// dropChunks deletes the chunks the head h does not name, listing them
// (those an earlier process left too: the first save after a start or a
// load, after a failed write or delete, and every listChunksEvery saves
// call it). It reports whether every chunk but h's is gone.
func (c *Controller) dropChunks(ctx context.Context, name string, h stateHead) bool {
	ns, _ := c.cfg.stateLocation()
	cms := c.cfg.Client.CoreV1().ConfigMaps(ns)
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{labelStateOf: name}).String()})
	if err != nil {
		c.log.Warn("listing state chunks", "err", err)
		return false
	}
	ok := true
	for _, cm := range list.Items {
		keep := false
		for i := range h.Chunks {
			keep = keep || cm.Name == chunkName(name, h.Gen%2, i)
		}
		if !keep {
			ok = c.dropChunk(ctx, cms, cm.Name) && ok
		}
	}
	return ok
}

func chunkName(name string, slot int64, i int) string {
	return fmt.Sprintf("%s-%d-%d", name, slot, i)
}

// requeueName is the ConfigMap of a preempted pod's gated copy: the state
// name and a hash of the pod's namespace and name (bounded length
// whatever they are).
func requeueName(state, ns, pod string) string {
	sum := sha256.Sum256([]byte(ns + "/" + pod))
	return state + "-rq-" + hex.EncodeToString(sum[:10])
}

// errCopyTooLarge is wrapped by podCopy's error for a pod too large to
// keep a copy of.
var errCopyTooLarge = errors.New("too large to keep a copy of")

// podCopy encodes a pod's gated copy, or says it is too large to keep
// (errCopyTooLarge).
func podCopy(p *corev1.Pod) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if len(b) > maxPodCopy {
		return nil, fmt.Errorf("pod %s/%s is %d bytes, more than the %d a preempted pod's copy may take: %w", p.Namespace, p.Name, len(b), maxPodCopy, errCopyTooLarge)
	}
	return b, nil
}
