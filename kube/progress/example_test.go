package progress_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/gpusched/gpusched/kube/progress"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A controller serves the channel with its resolver and sink; here the
// TokenReview API is a fake that vouches for one pod's token.
func Example() {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "eyJhbGciOiJSUzI1NiJ9.e30.c2ln" && tr.Spec.Audiences[0] == progress.DefaultAudience {
			tr.Status = authnv1.TokenReviewStatus{
				Authenticated: true,
				Audiences:     tr.Spec.Audiences,
				User: authnv1.UserInfo{
					Username: "system:serviceaccount:vision:trainer",
					Extra: map[string]authnv1.ExtraValue{
						"authentication.kubernetes.io/pod-name": {"resnet-0"},
						"authentication.kubernetes.io/pod-uid":  {"8d1f"},
					},
				},
			}
		}
		return true, tr, nil
	})
	srv, err := progress.New(progress.Config{
		Client: cs,
		Resolver: progress.ResolverFunc(func(ns, pod string, uid types.UID) (string, bool) {
			if ns == "vision" && pod == "resnet-0" && uid == "8d1f" {
				return "job/vision/resnet", true
			}
			return "", false
		}),
		Sink: progress.SinkFunc(func(workload string, steps float64, at time.Time) error {
			fmt.Printf("%s: %g steps\n", workload, steps)
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	for _, body := range []string{`{"steps": 1200}`, `{"steps": 1100}`} {
		req := httptest.NewRequest("POST", progress.Path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		fmt.Println(strings.TrimSpace(fmt.Sprint(rec.Code, " ", rec.Body.String())))
	}
	// Output:
	// job/vision/resnet: 1200 steps
	// 204
	// 409 {"error":"not_monotone","message":"progress: steps went back: 1100 after 1200"}
}
