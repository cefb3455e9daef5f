// Package blobstore keeps one document (a controller's saved state) in
// ConfigMaps of one namespace, gzip'd: in the head ConfigMap when it
// fits, else in chunk ConfigMaps name-<slot>-<i> written before the head
// that names them, in one of two slots taken in turn, so that a save cut
// short leaves the last complete document in place. The head holds a
// small JSON header (generation, size, SHA-256, chunks), checked at every
// load; a load never panics and never reads more than the caps
// (Store.MaxChunks chunks, MaxBytes uncompressed).
//
// It is the layout of the admission controller's saved state (package
// admission keeps its own copy, beside its records); the Kueue controller
// keeps what its estimator learned here.
package blobstore

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
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Keys and labels of the ConfigMaps.
const (
	keyHead  = "head.json"
	keyBlob  = "doc.json.gz"
	keyChunk = "part"
	labelOf  = "gpusched.io/state-of"
	labelGen = "gpusched.io/state-generation"
	version  = 1
)

// Caps: DefaultMaxChunks chunks of a document at most (Store.MaxChunks),
// MaxBytes uncompressed.
const (
	DefaultMaxChunks = 64
	MaxBytes         = 256 << 20
)

// maxGen bounds a generation (a save a second for 285 million years).
const maxGen = 1 << 53

// inlineMax is the largest compressed document kept in the head;
// chunkMax the size of a chunk (a ConfigMap holds at most 1 MiB).
// Variables for tests only.
var inlineMax, chunkMax = 900 << 10, 900 << 10

// Errors; test them with errors.Is.
var (
	// ErrCorrupt: a saved document that cannot be read (its header,
	// size, hash, chunks or compression), or one beyond the caps.
	ErrCorrupt = errors.New("blobstore: saved document unreadable")
	// ErrTooLarge: a document beyond the caps is not saved.
	ErrTooLarge = errors.New("blobstore: document too large")
)

// Store saves and loads one document. Client, Namespace and Name are
// required; ManagedBy labels the head (app.kubernetes.io/managed-by);
// MaxChunks bounds the chunks of a document (0: DefaultMaxChunks; at most
// that), and with them the ConfigMaps it writes (Names). Not safe for
// concurrent use: one controller (the leader) owns it.
type Store struct {
	Client          kubernetes.Interface
	Namespace, Name string
	ManagedBy       string
	MaxChunks       int

	gen int64 // the generation of the head last read or written
}

type header struct {
	Version int    `json:"version"`
	Gen     int64  `json:"generation"`
	Bytes   int    `json:"bytes"`
	SHA256  string `json:"sha256"`
	Chunks  int    `json:"chunks,omitempty"`
}

// Where names the head ConfigMap, namespace/name.
func (s *Store) Where() string { return s.Namespace + "/" + s.Name }

// maxChunks is MaxChunks or its default.
func (s *Store) maxChunks() int {
	if s.MaxChunks <= 0 || s.MaxChunks > DefaultMaxChunks {
		return DefaultMaxChunks
	}
	return s.MaxChunks
}

// Names lists every ConfigMap the store may write: the head, then the
// chunks of both slots (for an RBAC Role's resourceNames).
func (s *Store) Names() []string {
	out := []string{s.Name}
	for slot := range int64(2) {
		for i := range s.maxChunks() {
			out = append(out, chunkName(s.Name, slot, i))
		}
	}
	return out
}

func chunkName(name string, slot int64, i int) string {
	return fmt.Sprintf("%s-%d-%d", name, slot, i)
}

// Load returns the saved document, nil if there is none. A document that
// cannot be read is an error wrapping ErrCorrupt naming what is wrong;
// the API's errors are returned as they are.
func (s *Store) Load(ctx context.Context) ([]byte, error) {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	head, err := cms.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h, err := readHeader(head.Data[keyHead], s.maxChunks())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, s.Where(), err)
	}
	s.gen = h.Gen
	var gz []byte
	if h.Chunks == 0 {
		gz = head.BinaryData[keyBlob]
	} else {
		for i := range h.Chunks {
			cm, err := cms.Get(ctx, chunkName(s.Name, h.Gen%2, i), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("%w: %s: chunk %d of %d is missing", ErrCorrupt, s.Where(), i, h.Chunks)
			}
			if err != nil {
				return nil, err
			}
			if cm.Labels[labelOf] != s.Name || cm.Labels[labelGen] != strconv.FormatInt(h.Gen, 10) {
				return nil, fmt.Errorf("%w: %s: chunk %s is not of generation %d", ErrCorrupt, s.Where(), cm.Name, h.Gen)
			}
			part := cm.BinaryData[keyChunk]
			if len(gz)+len(part) > h.Bytes {
				return nil, fmt.Errorf("%w: %s: chunks beyond the header's %d bytes", ErrCorrupt, s.Where(), h.Bytes)
			}
			gz = append(gz, part...)
		}
	}
	if len(gz) != h.Bytes {
		return nil, fmt.Errorf("%w: %s: %d bytes, the header says %d", ErrCorrupt, s.Where(), len(gz), h.Bytes)
	}
	if sum := sha256.Sum256(gz); hex.EncodeToString(sum[:]) != h.SHA256 {
		return nil, fmt.Errorf("%w: %s: SHA-256 differs from the header's", ErrCorrupt, s.Where())
	}
	doc, err := gunzip(gz)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, s.Where(), err)
	}
	return doc, nil
}

// readHeader parses and checks a head's header (at most maxChunks).
func readHeader(s string, maxChunks int) (header, error) {
	var h header
	if s == "" {
		return h, fmt.Errorf("no %s", keyHead)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, fmt.Errorf("%s: %w", keyHead, err)
	}
	switch {
	case h.Version != version:
		return h, fmt.Errorf("%s: version %d (want %d)", keyHead, h.Version, version)
	case h.Gen < 1 || h.Gen > maxGen:
		return h, fmt.Errorf("%s: generation %d", keyHead, h.Gen)
	case h.Chunks < 0 || h.Chunks > maxChunks:
		return h, fmt.Errorf("%s: %d chunks (want 0 to %d)", keyHead, h.Chunks, maxChunks)
	case h.Bytes < 0 || h.Bytes > max(h.Chunks, 1)*chunkMax:
		return h, fmt.Errorf("%s: %d bytes in %d chunks", keyHead, h.Bytes, h.Chunks)
	case len(h.SHA256) != 64:
		return h, fmt.Errorf("%s: sha256 %q", keyHead, h.SHA256)
	}
	return h, nil
}

// gunzip decompresses at most MaxBytes.
func gunzip(gz []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	doc, err := io.ReadAll(io.LimitReader(zr, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(doc) > MaxBytes {
		return nil, fmt.Errorf("more than %d bytes uncompressed", MaxBytes)
	}
	return doc, nil
}

// Save writes doc: compressed, in the head or in chunks of the slot the
// head does not name, then the head, then drops the chunks of other
// generations. A document beyond the caps is refused (ErrTooLarge) and
// nothing is written. A save that fails leaves the last complete document
// in place (or, if its head write landed after all, the new one).
func (s *Store) Save(ctx context.Context, doc []byte) error {
	if len(doc) > MaxBytes {
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrTooLarge, len(doc), MaxBytes)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
	if _, err := zw.Write(doc); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	gz := buf.Bytes()
	if len(gz) > s.maxChunks()*chunkMax {
		return fmt.Errorf("%w: %d bytes compressed (at most %d chunks of %d)", ErrTooLarge, len(gz), s.maxChunks(), chunkMax)
	}
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	// The next generation goes past the head's in the API (this
	// store's last, one whose write failed but landed, or another
	// writer's: a leader handing over), so that its chunks go to the slot
	// the live head does not name. Two writers saving at once are not
	// kept apart (one leader writes).
	head, err := cms.Get(ctx, s.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		if h, err := readHeader(head.Data[keyHead], DefaultMaxChunks); err == nil {
			s.gen = max(s.gen, h.Gen)
		}
	}
	if s.gen >= maxGen {
		s.gen = 0 // the next head is generation 1, in slot 1
	}
	sum := sha256.Sum256(gz)
	h := header{Version: version, Gen: s.gen + 1, Bytes: len(gz), SHA256: hex.EncodeToString(sum[:])}
	head = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}}
	if s.ManagedBy != "" {
		head.Labels = map[string]string{"app.kubernetes.io/managed-by": s.ManagedBy}
	}
	if len(gz) <= inlineMax {
		head.BinaryData = map[string][]byte{keyBlob: gz}
	} else {
		for i := 0; i*chunkMax < len(gz); i++ {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: chunkName(s.Name, h.Gen%2, i), Namespace: s.Namespace,
				Labels: map[string]string{labelOf: s.Name, labelGen: strconv.FormatInt(h.Gen, 10)}},
				BinaryData: map[string][]byte{keyChunk: gz[i*chunkMax : min(len(gz), (i+1)*chunkMax)]}}
			if err := s.put(ctx, cm); err != nil {
				return err
			}
			h.Chunks++
		}
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return err
	}
	head.Data = map[string]string{keyHead: string(hj)}
	if err := s.put(ctx, head); err != nil {
		return err
	}
	s.gen = h.Gen
	return s.dropOthers(ctx, h.Gen)
}

// put creates or replaces a ConfigMap.
func (s *Store) put(ctx context.Context, cm *corev1.ConfigMap) error {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	_, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("blobstore: writing %s/%s: %w", s.Namespace, cm.Name, err)
	}
	return nil
}

// dropOthers deletes the chunks of other generations than gen.
func (s *Store) dropOthers(ctx context.Context, gen int64) error {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: labelOf + "=" + s.Name})
	if err != nil {
		return fmt.Errorf("blobstore: listing the chunks of %s: %w", s.Where(), err)
	}
	keep := strconv.FormatInt(gen, 10)
	for _, cm := range list.Items {
		if cm.Labels[labelGen] == keep {
			continue
		}
		if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("blobstore: dropping %s/%s: %w", s.Namespace, cm.Name, err)
		}
	}
	return nil
}
