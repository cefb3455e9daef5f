package tenancy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Load reads and compiles the tenancy of the ConfigMap ns/name (its key
// ConfigKey). A missing ConfigMap or key, or a document Parse refuses,
// is an error; the caller keeps the tenancy it had, if any.
func Load(ctx context.Context, cs kubernetes.Interface, ns, name string) (*Tenancy, string, error) {
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("tenancy: reading ConfigMap %s/%s: %w", ns, name, err)
	}
	return FromConfigMap(cm)
}

// FromConfigMap compiles the tenancy a ConfigMap holds (its key
// ConfigKey), as Load does once it has read it (from an informer's cache,
// say); it returns the ConfigMap's resourceVersion beside it.
func FromConfigMap(cm *corev1.ConfigMap) (*Tenancy, string, error) {
	raw, ok := cm.Data[ConfigKey]
	if !ok {
		return nil, cm.ResourceVersion, fmt.Errorf("%w: ConfigMap %s/%s has no key %s", ErrConfig, cm.Namespace, cm.Name, ConfigKey)
	}
	t, err := Parse([]byte(raw))
	if err != nil {
		return nil, cm.ResourceVersion, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return t, cm.ResourceVersion, nil
}
