package api

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
	"pgregory.net/rapid"
)

// referenceDecode is the behaviour ReadTask must match: encoding/json with
// unknown fields rejected, then Validate.
func referenceDecode(b []byte) (Task, error) {
	var t Task
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Task{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Task{}, errs.Invalid("", "trailing data")
	}
	if err := t.Validate(); err != nil {
		return Task{}, err
	}
	return t, nil
}

func readWhole(b []byte) (Task, error) {
	r := jsonread.New(b)
	t, err := ReadTask(r)
	if err != nil {
		return Task{}, err
	}
	if err := r.Finish(); err != nil {
		return Task{}, errs.Invalid("", "%v", err)
	}
	return t, nil
}

var taskSeeds = []string{
	`{"id":"a","resources":{"cpu":"500m","memory":"1Gi","nvidia.com/gpu":0.5}}`,
	`{"priority":3,"alternatives":[{"resources":{"google.com/tpu":1},"speed":1.5},null]}`,
	`{"duration":"5m","lease":30,"depends":["a"],"nodeSelector":{"a":"b|c"},"tolerations":["k=v:NoSchedule"]}`,
	`{"command":["sh","-c","echo \"hi\" \u00e9 \ud83d\ude00"],"env":{"A":"1","B":null},"timeout":"1h","preemptible":false}`,
	`{"metadata":{"k":"v"},"queue":"q1","name":"n","queueTimeout":1.5,"priority":null}`,
	`{"resources":{"cpu":1e3}}`, `{"priority":1.0}`, `{"priority":1e0}`, `{"resources":{"cpu":"-1"}}`,
	`{"Id":"x"}`, `{"id":"a","id":"b"}`, "{\"name\":\"\xff\"}", `{"name":"\ud800"}`, `null`, `{}`, `{"a":}`,
	`{"tolerations":[]}`, `{"env":{}}`, `{"alternatives":[]}`, `{"resources":{}}`, `{"speed":1}`,
	`{"command":["x"],"checkpoint":{"signal":"SIGUSR1","grace":"2m","dir":"r/1"}}`, `{"command":["x"],"checkpoint":{"grace":90}}`,
	`{"command":["x"],"checkpoint":{"signal":"SIGSTOP"}}`, `{"command":["x"],"checkpoint":{"dir":"../x"}}`, `{"checkpoint":{}}`,
	`{"command":["x"],"checkpoint":{"signal":1}}`, `{"command":["x"],"checkpoint":{"dri":"x"}}`, `{"command":["x"],"checkpoint":null}`,
	`{"command":["x"],"checkpoint":[]}`,
}

// TestReadTaskMatchesEncodingJSON checks the seeds against the reference.
func TestReadTaskMatchesEncodingJSON(t *testing.T) {
	for _, s := range taskSeeds {
		compareDecoders(t, []byte(s))
	}
}

// FuzzReadTask compares ReadTask with encoding/json on arbitrary input.
func FuzzReadTask(f *testing.F) {
	for _, s := range taskSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(compareDecoders)
}

// compareDecoders fails when ReadTask and the reference disagree, except
// where ReadTask is documented to be stricter.
func compareDecoders(t *testing.T, b []byte) {
	got, gotErr := readWhole(b)
	want, wantErr := referenceDecode(b)
	if gotErr != nil && errs.CodeOf(gotErr) != errs.InvalidArgument {
		t.Fatalf("%q: error with code %s: %v", b, errs.CodeOf(gotErr), gotErr)
	}
	switch {
	case gotErr == nil && wantErr == nil:
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%q: decoders differ (-encoding/json +ReadTask):\n%s", b, diff)
		}
	case gotErr == nil && wantErr != nil:
		t.Fatalf("%q: ReadTask accepted what encoding/json rejects: %v", b, wantErr)
	case gotErr != nil && wantErr == nil:
		if !stricterOnPurpose(b, gotErr) {
			t.Fatalf("%q: ReadTask rejected what encoding/json accepts: %v", b, gotErr)
		}
	}
}

// stricterOnPurpose reports whether err is one of ReadTask's documented
// departures: exact member names, no repeated members, valid UTF-8.
func stricterOnPurpose(b []byte, err error) bool {
	msg := err.Error()
	if strings.Contains(msg, "given twice") || strings.Contains(msg, "invalid UTF-8") ||
		strings.Contains(msg, "a lease of 0") || strings.Contains(msg, "shards of 0") {
		return true
	}
	if strings.Contains(msg, "unknown field") {
		f := errs.FieldOf(err)
		if i := strings.LastIndexAny(f, ".]"); i >= 0 {
			f = f[i+1:]
		}
		for _, k := range []string{"id", "name", "queue", "priority", "resources", "alternatives", "nodeSelector",
			"tolerations", "command", "env", "duration", "timeout", "queueTimeout", "lease", "depends",
			"preemptible", "metadata", "speed", "requeue", "locality", "localityWait", "shards", "inputs", "nodes", "labels", "checkpoint", "signal", "grace", "dir"} {
			if strings.EqualFold(f, k) && f != k {
				return true
			}
		}
		// encoding/json also folds the Kelvin sign and long s in names.
		if !utf8.ValidString(f) || strings.ContainsAny(f, "\u212a\u017f") {
			return true
		}
	}
	return false
}

// TestValidIDMatchesPattern: the hand-written id check is the documented
// regular expression.
func TestValidIDMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.:]*[A-Za-z0-9])?$`)
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.RuneFrom([]rune("aZ09-_.:/ é"))).Draw(t, "id")
		if validID(s) != re.MatchString(s) {
			t.Fatalf("%q: validID %v, pattern %v", s, validID(s), re.MatchString(s))
		}
	})
}

// TestLabelChecksMatchPatterns: the hand-written label name and DNS
// subdomain checks are the documented regular expressions.
func TestLabelChecksMatchPatterns(t *testing.T) {
	name := regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	dns := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.RuneFrom([]rune("aZ09-_.:/ é"))).Draw(t, "s")
		if validLabelName(s) != name.MatchString(s) {
			t.Fatalf("%q: validLabelName %v, pattern %v", s, validLabelName(s), name.MatchString(s))
		}
		if validDNSSubdomain(s) != dns.MatchString(s) {
			t.Fatalf("%q: validDNSSubdomain %v, pattern %v", s, validDNSSubdomain(s), dns.MatchString(s))
		}
	})
}

func BenchmarkValidateLabel(b *testing.B) {
	for b.Loop() {
		if ValidateLabelKey("node.kubernetes.io/not-ready") != nil || ValidateLabelValue("NVIDIA-H100-80GB-HBM3") != nil {
			b.Fatal("refused")
		}
	}
}
