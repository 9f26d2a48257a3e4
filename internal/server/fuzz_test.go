package server

import (
	"encoding/json"
	"testing"

	"github.com/hetsched/hetsched/internal/errs"
)

// FuzzDecodeTasks feeds arbitrary bodies to the request decoder: it must
// never panic, every error must carry an API code other than internal,
// and every accepted task must pass validation and survive a JSON round
// trip through the decoder again.
func FuzzDecodeTasks(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","resources":{"cpu":"500m","memory":"1Gi","nvidia.com/gpu":0.5}}`,
		`{"tasks":[{"resources":{"cpu":1}},{"priority":3,"alternatives":[{"resources":{"google.com/tpu":1},"speed":1.5}]}]}`,
		`{"resources":{"cpu":"-1"}}`, `{"tasks":[]}`, `[]`, `null`, `{"priority":"x"}`, `{"bogus":1}`,
		`{"duration":"5m","lease":"30s","depends":["a"],"nodeSelector":{"a":"b|c"},"tolerations":["k=v:NoSchedule"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tasks, batch, err := decodeTasks(body)
		if err != nil {
			if errs.CodeOf(err) == errs.Internal {
				t.Fatalf("internal error for %q: %v", body, err)
			}
			return
		}
		if len(tasks) == 0 || (!batch && len(tasks) != 1) {
			t.Fatalf("accepted %q as %d tasks (batch %v)", body, len(tasks), batch)
		}
		for _, tk := range tasks {
			if err := tk.Validate(); err != nil {
				t.Fatalf("accepted an invalid task from %q: %v", body, err)
			}
			b, err := json.Marshal(tk)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := decodeTasks(b); err != nil {
				t.Fatalf("re-decoding %s: %v", b, err)
			}
		}
	})
}
