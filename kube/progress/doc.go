// Package progress is the channel through which a training job reports
// its progress to gpusched's controllers (issue #41): its cumulative
// steps, from which the scheduling core learns the job's throughput on
// the GPU type it runs on (scheduler.Scheduler.Progress,
// perfmodel/learn).
//
// A job reports in three lines, with the Python client
// (kube/progress/python, standard library only) or the Go one
// (kube/progress/client):
//
//	from gpusched_progress import Reporter
//	reporter = Reporter()
//	reporter.report(step)  # in the loop; never blocks, never raises
//
// Each report is one HTTPS request,
//
//	POST /v1/progress
//	Authorization: Bearer <the pod's projected service account token>
//	Content-Type: application/json
//
//	{"steps": 1200}
//
// answered 204 No Content when taken. The [Server] authenticates it as
// the pod it comes from: the token is a projected service account token
// for the audience "gpusched-progress" ([DefaultAudience]), which the
// server has the API server review (TokenReview, authentication.k8s.io/v1,
// with spec.audiences); only a service account's token bound to a pod
// (its pod name and UID in the review's user.extra, as the kubelet's
// projected tokens are) is accepted, and the pod is the account's
// namespace's. A [Resolver], which the controllers implement from their
// caches, maps the pod (namespace, name and UID) to its workload's key;
// a pod of no workload is refused. The steps go to a [Sink] with the
// server's time, never the reporter's; the GPU type and count are the
// core's, where it placed the job, so a job's reports can move only its
// own estimates, on the type it really runs on.
//
// Bounds: a body of at most [MaxBody] bytes, [Decode]d strictly (one
// object, "steps" and an optional "total", finite, in [0, [MaxSteps]]);
// steps monotone per pod; a token bucket per pod (one report per 5 s,
// bursts of 3, by default; 429 with Retry-After beyond it); at most
// 65,536 pods tracked (the least recently reporting forgotten first);
// reviews cached by the token's SHA-256 for two minutes (never past the
// token's expiry; refusals for 10 s, kept apart), at most 65,536 of them,
// and at most 50 new reviews a second. Every refusal is an [*Error] of one of the Err
// kinds, answered with its HTTP status and a JSON body that names what
// was wrong and never echoes the token or the cause.
//
// Server is safe for concurrent use. kube/docs/progress.md shows how a
// pod gets its token; kube/SECURITY.md what a tenant can and cannot do
// with the channel.
package progress
