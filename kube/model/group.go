package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ProgramGroup names the program a workload runs, for the throughput
// learner's groups (scheduler.JobSpec.Group, learn.JobInfo.Group): the
// runs of one program share what they measured, so that a training
// script submitted again starts where its last run ended. The name is
// made from what the cluster sees, never from a string the tenant
// writes into it: the workload's namespace, then, when its annotations
// (ann) name a kind (AnnotationJobKind, the tenant's own name for its
// program, with AnnotationBatchSize), that kind and batch size, else a
// SHA-256 of every container's image, command and arguments (init
// containers first, in order); and its GPU count:
//
//	<namespace>/kind/<kind>@<batch size>/x<gpus>
//	<namespace>/sha256/<first 32 hex digits>/x<gpus>
//
// The namespace scopes every group: a tenant can join or split only its
// own namespace's groups, whatever it writes. A kind or batch size of
// more than 128 bytes, or with a character outside [A-Za-z0-9._-], is
// hashed with the containers instead of written. The result is at most
// 512 bytes (learn.MaxGroupLen). Cost: O(size of the containers' images,
// commands and arguments).
func ProgramGroup(namespace string, spec *corev1.PodSpec, gpus int, ann map[string]string) string {
	gp := "/x" + strconv.Itoa(gpus)
	kind, batch := strings.TrimSpace(ann[AnnotationJobKind]), strings.TrimSpace(ann[AnnotationBatchSize])
	if kind != "" && len(kind) <= 128 && plainName(kind) && len(batch) <= 128 && plainName(batch) {
		return namespace + "/kind/" + kind + "@" + batch + gp
	}
	h := sha256.New()
	field(h, kind)
	field(h, batch)
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		field(h, strconv.Itoa(len(cs)))
		for i := range cs {
			c := &cs[i]
			field(h, c.Image)
			for _, list := range [][]string{c.Command, c.Args} {
				field(h, strconv.Itoa(len(list)))
				for _, s := range list {
					field(h, s)
				}
			}
		}
	}
	sum := h.Sum(nil)
	return namespace + "/sha256/" + hex.EncodeToString(sum[:16]) + gp
}

// field writes s to h with its length first, so that no two lists of
// strings hash alike by moving a boundary.
func field(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

// plainName reports whether s has only the characters [A-Za-z0-9._-].
func plainName(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}
