package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/deploy"
	"github.com/gpusched/gpusched/kube/gpusched"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
)

// instruction is one Dockerfile instruction, its continuation lines
// joined.
type instruction struct {
	cmd, args string
}

// parseDockerfile reads a Dockerfile's instructions (comments and blank
// lines left out, a trailing backslash joining lines).
func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []instruction
	var cur strings.Builder
	for line := range strings.SplitSeq(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	require.Zero(t, cur.Len(), "%s ends in a continuation", path)
	return out
}

// digestPlaceholder stands, in the Dockerfiles' base images, for the
// digest the admin looks up and fills in (it cannot be verified offline);
// a build with it fails rather than pull by tag.
const digestPlaceholder = "sha256:PIN-THE-DIGEST"

// pinned reports why an image reference is not pinned by digest: a
// third-party base image pulled by tag can be moved under the build (#40).
// The reference must end in @sha256: and 64 hex digits, or in the
// placeholder that makes the admin fill one.
func pinned(ref string) error {
	_, digest, ok := strings.Cut(ref, "@")
	switch {
	case !ok:
		return fmt.Errorf("%s is pulled by tag, not pinned by digest (@sha256:...)", ref)
	case digest == digestPlaceholder:
		return nil
	case !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(digest):
		return fmt.Errorf("%s: %q is not a sha256 digest (64 hex digits) nor the placeholder %s", ref, digest, digestPlaceholder)
	}
	return nil
}

func TestPinned(t *testing.T) {
	for ref, ok := range map[string]bool{
		"golang:1.26-bookworm":                                                                          false,
		"golang:1.26-bookworm@" + digestPlaceholder:                                                     true,
		"golang@sha256:" + strings.Repeat("ab", 32):                                                     true,
		"gcr.io/distroless/static-debian12:nonroot@sha256:" + strings.Repeat("0f", 32):                  true,
		"gcr.io/distroless/static-debian12:nonroot@sha256:" + strings.Repeat("0f", 31):                  false,
		"gcr.io/distroless/static-debian12:nonroot@sha256:" + strings.ToUpper(strings.Repeat("0f", 32)): false,
		"golang:1.26@latest": false,
	} {
		assert.Equal(t, ok, pinned(ref) == nil, "%s: %v", ref, pinned(ref))
	}
}

// The images: one Dockerfile per binary, multi-stage (the Go toolchain
// of go.mod's version builds a static binary; distroless's static image,
// as its nonroot user, runs it), built from a clone's root: every file it
// copies exists there, the package it builds is the binary's main
// package, and the Deployment runs the binary the image holds, as a
// non-root user, under the image name the Dockerfile's build command
// tags.
func TestImages(t *testing.T) {
	root := filepath.Join("..", "..")
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	gover := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	require.NotNil(t, gover, "go.mod's go directive")
	goMinor := string(gover[1])
	deployments := map[string]*appsv1.Deployment{}
	for _, f := range []string{"deployment.yaml", "admission-deployment.yaml", "kueue-deployment.yaml"} {
		for _, o := range objects(t, f) {
			if d, ok := o.(*appsv1.Deployment); ok {
				deployments[d.Spec.Template.Spec.Containers[0].Image] = d
			}
		}
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	assert.Contains(t, strings.Fields(string(ignore)), "**/.cache", "the e2e binaries stay out of the build context")

	for _, bin := range []string{"gpusched-scheduler", "gpusched-admission", "gpusched-kueue"} {
		t.Run(bin, func(t *testing.T) {
			file := filepath.Join("images", bin+".Dockerfile")
			ins := parseDockerfile(t, file)
			args := map[string]string{}
			var froms []string
			var final []instruction
			for _, in := range ins {
				switch in.cmd {
				case "ARG":
					k, v, _ := strings.Cut(in.args, "=")
					args[k] = v
				case "FROM":
					froms = append(froms, os.Expand(in.args, func(k string) string { return args[k] }))
					final = nil
				}
				final = append(final, in)
			}
			require.Len(t, froms, 2, "two stages")
			assert.Regexp(t, `^golang:`+regexp.QuoteMeta(goMinor)+`(\.\d+)?(-\w+)?@\S+ AS build$`, froms[0], "the build stage uses go.mod's Go (%s)", goMinor)
			assert.Regexp(t, `^gcr\.io/distroless/static(-debian\d+)?:nonroot@\S+$`, froms[1], "distroless, static, nonroot")
			for _, f := range froms {
				ref, _, _ := strings.Cut(f, " ")
				assert.NoError(t, pinned(ref), "FROM %s", f)
			}
			// No syntax directive: BuildKit would pull that frontend
			// image by its tag.
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			assert.NotRegexp(t, `(?mi)^#\s*syntax\s*=`, string(b), "a # syntax= directive pulls an image by tag")

			var built string
			for _, in := range ins {
				switch {
				case in.cmd == "COPY" && !strings.HasPrefix(in.args, "--from"):
					f := strings.Fields(in.args)
					for _, src := range f[:len(f)-1] {
						_, err := os.Stat(filepath.Join(root, src))
						assert.NoError(t, err, "COPY %s: not in a clone", src)
					}
				case in.cmd == "RUN" && strings.Contains(in.args, "go build"):
					assert.Contains(t, in.args, "CGO_ENABLED=0", "a static binary for the static image")
					assert.Contains(t, in.args, "cd kube &&", "built in the kube module")
					m := regexp.MustCompile(`-o (\S+) (\./cmd/\S+)`).FindStringSubmatch(in.args)
					require.NotNil(t, m, "go build -o OUT ./cmd/...: %s", in.args)
					built = m[1]
					pkg := filepath.Join("..", m[2])
					assert.Equal(t, "./cmd/"+bin, m[2])
					main, err := os.ReadFile(filepath.Join(pkg, "main.go"))
					require.NoError(t, err, "the package %s", m[2])
					assert.Contains(t, string(main), "package main")
				}
			}
			require.NotEmpty(t, built, "no go build")

			var entry []string
			user := ""
			for _, in := range final {
				switch in.cmd {
				case "COPY":
					assert.Equal(t, "--from=build "+built+" /"+bin, in.args, "the final stage holds the binary alone")
				case "USER":
					user = in.args
				case "ENTRYPOINT":
					require.NoError(t, json.Unmarshal([]byte(in.args), &entry), "ENTRYPOINT in exec form")
				case "RUN":
					t.Errorf("the distroless stage runs nothing: RUN %s", in.args)
				}
			}
			assert.Equal(t, []string{"/" + bin}, entry)
			uid, _, _ := strings.Cut(user, ":")
			n, err := strconv.Atoi(uid)
			require.NoError(t, err, "a numeric USER, so that runAsNonRoot can check it: %q", user)
			assert.Positive(t, n, "not root")

			// The build command in the header tags the image the
			// Deployment runs.
			tag := regexp.MustCompile(`docker build -f kube/deploy/images/` + regexp.QuoteMeta(bin) + `\.Dockerfile\s*\\?\s*#?\s*-t (\S+) \.`).FindStringSubmatch(string(b))
			require.NotNil(t, tag, "the header's docker build command")
			d := deployments[tag[1]]
			require.NotNil(t, d, "a Deployment runs %s (images: %v)", tag[1], slices.Collect(func(yield func(string) bool) {
				for k := range deployments {
					if !yield(k) {
						return
					}
				}
			}))
			c := d.Spec.Template.Spec.Containers[0]
			if len(c.Command) > 0 {
				assert.Equal(t, "/"+bin, c.Command[0], "the Deployment runs the image's binary")
			}
			require.NotNil(t, c.SecurityContext)
			require.NotNil(t, c.SecurityContext.RunAsNonRoot)
			assert.True(t, *c.SecurityContext.RunAsNonRoot)
		})
	}
}

// The Grafana dashboard parses, and every gpusched_ metric its queries
// read is one the code registers (TestE2EMetrics checks them all, the
// scheduler's own too, against live scrapes).
func TestDashboard(t *testing.T) {
	exprs, err := deploy.DashboardQueries()
	require.NoError(t, err)
	require.NotEmpty(t, exprs)
	known := map[string]bool{}
	for _, n := range slices.Concat(admission.NewMetrics().Names(), gpusched.MetricNames(), kueue.NewMetrics().Names()) {
		known[n] = true
	}
	used := map[string]bool{}
	for _, e := range exprs {
		for _, n := range regexp.MustCompile(`gpusched_[a-z0-9_]+`).FindAllString(e, -1) {
			used[n] = true
			base := n
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, s)
			}
			assert.True(t, known[n] || known[base], "the dashboard queries %s, which no code registers (in %q)", n, e)
		}
	}
	for n := range known {
		hit := false
		for u := range used {
			hit = hit || strings.HasPrefix(u, n)
		}
		assert.True(t, hit, "metric %s is on no panel", n)
	}
}
