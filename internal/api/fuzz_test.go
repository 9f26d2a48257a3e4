package api

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzTaskJSON decodes arbitrary bytes into a Task and validates it. Neither
// may panic; a task that validates must survive marshal and decode
// unchanged (up to empty versus nil collections) and still validate.
func FuzzTaskJSON(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`null`,
		`{"id":"train-1","name":"n","queue":"q","priority":1,"resources":{"cpu":"500m","memory":"16Gi","nvidia.com/gpu":2},` +
			`"alternatives":[{"resources":{"google.com/tpu":4},"speed":1.5}],"nodeSelector":{"zone":"a|b"},` +
			`"tolerations":["k=v:NoSchedule","*"],"command":["python","x.py"],"env":{"A":"1"},"duration":"30m",` +
			`"timeout":3600,"queueTimeout":"1m","depends":["a","b"],"preemptible":false,"metadata":{"k":"v"}}`,
		`{"lease":"5m","resources":{"nvidia.com/gpu":"0.5"}}`,
		`{"resources":{"nvidia.com/gpu":1.5}}`,
		`{"resources":{"cpu":"1e-3","memory":"0.1"}}`,
		`{"priority":7}`,
		`{"timeout":"-1s"}`,
		`{"duration":1e-10}`,
		`{"depends":["a","a"]}`,
		`{"resources":{"gpu":1}}`,
		`{"alternatives":[{"resources":null}]}`,
		`{"nodeSelector":{"a":"1"},"nodeSelector":{"b":"2"}}`,
		`{"ID":"x","Resources":{"cpu":1}}`,
		`{"bogus":1}`,
		`[1,2`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := decodeTask(data)
		if err != nil {
			return
		}
		if err := task.Validate(); err != nil {
			return
		}
		out, err := json.Marshal(task)
		if err != nil {
			t.Fatalf("marshal of a valid task %+v: %v", task, err)
		}
		back, err := decodeTask(out)
		if err != nil {
			t.Fatalf("decode of marshaled %s: %v", out, err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("re-decoded task %s no longer validates: %v", out, err)
		}
		if d := cmp.Diff(task, back, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip of %s changed the task (-first +second):\n%s", out, d)
		}
	})
}
