package tenancy

import (
	"context"
	"fmt"

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
	raw, ok := cm.Data[ConfigKey]
	if !ok {
		return nil, cm.ResourceVersion, fmt.Errorf("%w: ConfigMap %s/%s has no key %s", ErrConfig, ns, name, ConfigKey)
	}
	t, err := Parse([]byte(raw))
	if err != nil {
		return nil, cm.ResourceVersion, fmt.Errorf("ConfigMap %s/%s: %w", ns, name, err)
	}
	return t, cm.ResourceVersion, nil
}
