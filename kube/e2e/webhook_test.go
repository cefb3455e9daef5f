package e2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/internal/kubetest"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// labelMutate asks the test webhook (startMutatingWebhook) for a change:
// its value names the JSON patch the webhook answers with.
const labelMutate = "e2e.gpusched.io/mutate"

// webhookPatches are the changes the test webhook makes, by the value of
// labelMutate on the object: a GPU limit on a pod's first container, a
// Kueue queue label. They play "another webhook" that acts after the
// admission policies (the API server runs mutating admission policies
// before mutating webhooks).
var webhookPatches = map[string]string{
	"add-gpu":   `[{"op":"add","path":"/spec/containers/0/resources/limits","value":{"nvidia.com/gpu":"1"}}]`,
	"add-queue": `[{"op":"add","path":"/metadata/labels/kueue.x-k8s.io~1queue-name","value":"webhook-queue"}]`,
}

// startMutatingWebhook serves a mutating webhook over TLS on the loopback
// and registers it with the API server for the CREATE of pods and Jobs
// that carry labelMutate; both go when the test ends.
func startMutatingWebhook(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, name string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		var obj metav1.PartialObjectMetadata
		_ = json.Unmarshal(review.Request.Object.Raw, &obj)
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if p, ok := webhookPatches[obj.Labels[labelMutate]]; ok {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = []byte(p), &pt
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/mutate"
	none, never, fail := admissionregv1.SideEffectClassNone, admissionregv1.NeverReinvocationPolicy, admissionregv1.Fail
	cfg := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:                    name + ".e2e.gpusched.io",
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules:                   []admissionregv1.RuleWithOperations{webhookRule("", "v1", "pods"), webhookRule("batch", "v1", "jobs")},
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: labelMutate, Operator: metav1.LabelSelectorOpExists}}},
			SideEffects:             &none,
			ReinvocationPolicy:      &never,
			FailurePolicy:           &fail,
			TimeoutSeconds:          ptr(int32(10)),
			AdmissionReviewVersions: []string{"v1"},
		}}}
	_, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{})
	must(t, err, "the test webhook")
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func webhookRule(group, version, resource string) admissionregv1.RuleWithOperations {
	return admissionregv1.RuleWithOperations{Operations: []admissionregv1.OperationType{admissionregv1.Create},
		Rule: admissionregv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}}}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ensureStubCRD registers a namespaced kind whose spec takes any fields
// (the kinds Kueue integrates: JobSet, PyTorchJob, RayJob, ...), so that
// the admission policies can be played against objects of their shapes
// without their controllers, and waits until the API server serves it.
func ensureStubCRD(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, kind string) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": gvr.Resource + "." + gvr.Group},
		"spec": map[string]any{
			"group": gvr.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": gvr.Resource, "kind": kind},
			"versions": []any{map[string]any{"name": gvr.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}},
		}}}
	_, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("CRD %s: %v", gvr.Resource, err)
	}
	waitFor(ctx, t, "the CRD "+gvr.Resource+" served", nil, func() (bool, string) {
		_, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			return false, err.Error()
		}
		return true, ""
	})
}
