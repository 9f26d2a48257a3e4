package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Resources the checks read.
var (
	deployments     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	services        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	roles           = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	clusterBindings = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	clusterRoles    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	serviceMonitors = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	queueObjects    = schema.GroupVersionResource{Group: "hetsched.io", Version: "v1alpha1", Resource: "queues"}
	schedules       = schema.GroupVersionResource{Group: "hetsched.io", Version: "v1alpha1", Resource: "resourceschedules"}
)

// expect checks that a rendering's values reached the objects the API
// server holds. Its expectations are written from values.yaml's comments,
// independently of the templates.
type expect struct {
	a        *applier
	r        rendering
	vals     map[string]any
	fullname string
}

func (e *expect) val(path string) any {
	v, _ := lookup(e.vals, path)
	return v
}

func (e *expect) errorf(format string, args ...any) {
	e.a.t.Helper()
	e.a.t.Errorf("%s: "+format, append([]any{e.r.name}, args...)...)
}

// field reads a field of an object.
func field(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

// equal reports a field that is not the value.
func (e *expect) equal(what string, got, want any) {
	e.a.t.Helper()
	if !same(got, want) {
		e.errorf("%s is %v, want %v", what, got, want)
	}
}

// optional is equal for a value whose empty form means "not set": the
// field must then be absent.
func (e *expect) optional(what string, got, want any) {
	e.a.t.Helper()
	if isEmpty(want) {
		if !isEmpty(got) {
			e.errorf("%s is %v, want none", what, got)
		}
		return
	}
	e.equal(what, got, want)
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// contains reports the entries of want missing from the map got.
func (e *expect) contains(what string, got any, want any) {
	e.a.t.Helper()
	g, _ := got.(map[string]any)
	w, _ := want.(map[string]any)
	for k, v := range w {
		if !same(g[k], v) {
			e.errorf("%s[%s] is %v, want %v", what, k, g[k], v)
		}
	}
}

// wantArgs are the container's args values.yaml documents: each value a
// flag, set only when the value is.
func (e *expect) wantArgs() []string {
	args := []string{"kube"}
	add := func(flag string, v any) {
		if !isEmpty(v) && !same(v, 0) {
			args = append(args, fmt.Sprintf("--%s=%v", flag, v))
		}
	}
	if e.val("leaderElection.enabled") == true {
		ns, name := str(e.vals, "leaderElection.leaseNamespace"), str(e.vals, "leaderElection.leaseName")
		if ns == "" {
			ns = e.r.namespace
		}
		if name == "" {
			name = e.fullname
		}
		add("lease-namespace", ns)
		add("lease-name", name)
		add("lease-duration", e.val("leaderElection.leaseDuration"))
		add("renew-deadline", e.val("leaderElection.renewDeadline"))
		add("retry-period", e.val("leaderElection.retryPeriod"))
	} else {
		args = append(args, "--leader-elect=false")
	}
	add("scheduler-name", e.val("scheduler.name"))
	if l, _ := e.val("scheduler.deviceResources").([]any); len(l) > 0 {
		var names []string
		for _, n := range l {
			names = append(names, fmt.Sprint(n))
		}
		add("device-resources", strings.Join(names, ","))
	}
	if e.val("scheduler.defaultSpread") == false {
		args = append(args, "--default-spread=false")
	}
	for _, f := range [][2]string{{"bind-workers", "bindWorkers"}, {"kube-api-qps", "kubeAPIQPS"}, {"kube-api-burst", "kubeAPIBurst"},
		{"gomaxprocs", "gomaxprocs"}, {"gc-percent", "gcPercent"}, {"log-format", "logFormat"}, {"log-level", "logLevel"}} {
		add(f[0], e.val("scheduler."+f[1]))
	}
	add("listen", fmt.Sprintf("0.0.0.0:%v", e.val("metrics.port")))
	add("metrics-auth", e.val("metrics.auth"))
	if str(e.vals, "metrics.tlsSecret") != "" {
		add("tls-cert", "/etc/hetsched/tls/tls.crt")
		add("tls-key", "/etc/hetsched/tls/tls.key")
	}
	return args
}

// deployment checks the Deployment, its pod and its container.
func (e *expect) deployment() {
	e.a.t.Helper()
	d := e.a.get(deployments, e.r.namespace, e.fullname)
	if d == nil {
		e.errorf("no Deployment %s/%s", e.r.namespace, e.fullname)
		return
	}
	e.equal("replicas", field(d, "spec", "replicas"), e.val("replicas"))
	pod := func(path ...string) any { return field(d, append([]string{"spec", "template", "spec"}, path...)...) }
	e.equal("serviceAccountName", pod("serviceAccountName"), e.fullname)
	e.optional("priorityClassName", pod("priorityClassName"), e.val("priorityClassName"))
	for _, v := range []string{"imagePullSecrets", "nodeSelector", "tolerations", "affinity"} {
		e.optional(v, pod(v), e.val(v))
	}
	e.contains("the pod's labels", field(d, "spec", "template", "metadata", "labels"), e.val("podLabels"))
	e.contains("the pod's annotations", field(d, "spec", "template", "metadata", "annotations"), e.val("podAnnotations"))
	e.equal("the pod's securityContext", pod("securityContext"),
		map[string]any{"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": map[string]any{"type": "RuntimeDefault"}})
	cs, _ := pod("containers").([]any)
	if len(cs) != 1 {
		e.errorf("%d containers, want 1", len(cs))
		return
	}
	c := &unstructured.Unstructured{Object: cs[0].(map[string]any)}
	image := str(e.vals, "image.repository") + ":" + str(e.vals, "image.tag")
	if str(e.vals, "image.tag") == "" {
		image += appVersion(e.a.t)
	}
	if dg := str(e.vals, "image.digest"); dg != "" {
		image = str(e.vals, "image.repository") + "@" + dg
	}
	e.equal("image", field(c, "image"), image)
	e.equal("imagePullPolicy", field(c, "imagePullPolicy"), e.val("image.pullPolicy"))
	e.equal("args", field(c, "args"), e.wantArgs())
	e.equal("resources", field(c, "resources"), e.val("resources"))
	e.equal("ports", field(c, "ports"), []any{map[string]any{"name": "metrics", "containerPort": e.val("metrics.port"), "protocol": "TCP"}})
	scheme := "HTTP"
	if e.val("metrics.auth") == "kubernetes" {
		scheme = "HTTPS"
	}
	for probe, v := range map[string]string{"livenessProbe": "probes.liveness", "readinessProbe": "probes.readiness"} {
		want, _ := e.val(v).(map[string]any)
		want = mergeValues(want, map[string]any{"successThreshold": 1,
			"httpGet": map[string]any{"path": "/healthz", "port": "metrics", "scheme": scheme}})
		if same(want["initialDelaySeconds"], 0) {
			delete(want, "initialDelaySeconds") // the API server's zero is absent
		}
		e.equal(probe, field(c, probe), want)
	}
	e.equal("the container's securityContext", field(c, "securityContext"), map[string]any{
		"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}}})
	var wantVolumes any
	if s := str(e.vals, "metrics.tlsSecret"); s != "" {
		wantVolumes = []any{map[string]any{"name": "tls", "secret": map[string]any{"secretName": s, "defaultMode": 420}}}
	}
	e.optional("volumes", pod("volumes"), wantVolumes)
}

// appVersion is the chart's appVersion, the image tag when image.tag is
// empty.
func appVersion(t interface {
	Helper()
	Fatal(...any)
}) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" {
		t.Fatal("Chart.yaml's appVersion: ", err)
	}
	return c.AppVersion
}

// rbac checks the ServiceAccount, the leader Role and the metrics
// roles.
func (e *expect) rbac() {
	e.a.t.Helper()
	sa := e.a.get(serviceAccounts, e.r.namespace, e.fullname)
	if sa == nil {
		e.errorf("no ServiceAccount %s/%s", e.r.namespace, e.fullname)
		return
	}
	e.contains("the ServiceAccount's annotations", field(sa, "metadata", "annotations"), e.val("serviceAccount.annotations"))
	leaseNS := str(e.vals, "leaderElection.leaseNamespace")
	if leaseNS == "" {
		leaseNS = e.r.namespace
	}
	role := e.a.get(roles, leaseNS, e.fullname+"-leader")
	if on := e.val("leaderElection.enabled") == true; on != (role != nil) {
		e.errorf("leader election %v, but the leader Role in %s exists: %v", on, leaseNS, role != nil)
	} else if on {
		lease := str(e.vals, "leaderElection.leaseName")
		if lease == "" {
			lease = e.fullname
		}
		rules, _ := field(role, "rules").([]any)
		e.equal("the leader Role's lease", field(&unstructured.Unstructured{Object: rules[len(rules)-1].(map[string]any)}, "resourceNames"), []any{lease})
	}
	https := e.val("metrics.auth") == "kubernetes"
	for _, name := range []string{e.fullname + "-auth-delegator"} {
		if got := e.a.get(clusterBindings, "", name) != nil; got != https {
			e.errorf("ClusterRoleBinding %s exists: %v, want %v (metrics.auth %v)", name, got, https, e.val("metrics.auth"))
		}
	}
	if got := e.a.get(clusterRoles, "", e.fullname+"-metrics-reader") != nil; got != https {
		e.errorf("ClusterRole %s-metrics-reader exists: %v, want %v", e.fullname, got, https)
	}
	b := e.a.get(clusterBindings, "", e.fullname+"-metrics-reader")
	name := str(e.vals, "metrics.prometheusServiceAccount.name")
	if (b != nil) != (name != "") {
		e.errorf("the metrics reader's binding exists: %v, metrics.prometheusServiceAccount.name %q", b != nil, name)
	} else if b != nil {
		ns := str(e.vals, "metrics.prometheusServiceAccount.namespace")
		if ns == "" {
			ns = e.r.namespace
		}
		e.equal("the metrics reader's subjects", field(b, "subjects"), []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": ns}})
	}
}

// metrics checks the Service and the ServiceMonitor.
func (e *expect) metrics() {
	e.a.t.Helper()
	svc := e.a.get(services, e.r.namespace, e.fullname+"-metrics")
	if svc == nil {
		e.errorf("no Service %s-metrics", e.fullname)
		return
	}
	ports, _ := field(svc, "spec", "ports").([]any)
	if len(ports) != 1 || !same(ports[0].(map[string]any)["port"], e.val("metrics.port")) {
		e.errorf("the Service's ports %v, want metrics.port %v", ports, e.val("metrics.port"))
	}
	sm := e.a.get(serviceMonitors, e.r.namespace, e.fullname)
	if on := e.val("serviceMonitor.enabled") == true; on != (sm != nil) {
		e.errorf("serviceMonitor.enabled %v, but the ServiceMonitor exists: %v", on, sm != nil)
		return
	} else if !on {
		return
	}
	e.contains("the ServiceMonitor's labels", field(sm, "metadata", "labels"), e.val("serviceMonitor.labels"))
	eps, _ := field(sm, "spec", "endpoints").([]any)
	if len(eps) != 1 {
		e.errorf("the ServiceMonitor's endpoints %v", eps)
		return
	}
	ep := eps[0].(map[string]any)
	want := map[string]any{"port": "metrics", "path": "/metrics", "scheme": "http"}
	if e.val("metrics.auth") == "kubernetes" {
		tls := map[string]any{}
		if e.val("serviceMonitor.tls.insecureSkipVerify") == true {
			tls["insecureSkipVerify"] = true
		}
		if s := str(e.vals, "serviceMonitor.tls.serverName"); s != "" {
			tls["serverName"] = s
		}
		if s := str(e.vals, "serviceMonitor.tls.caSecret.name"); s != "" {
			key := str(e.vals, "serviceMonitor.tls.caSecret.key")
			if key == "" {
				key = "ca.crt"
			}
			tls["ca"] = map[string]any{"secret": map[string]any{"name": s, "key": key}}
		}
		want["scheme"], want["tlsConfig"] = "https", tls
		want["bearerTokenFile"] = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	}
	for _, k := range []string{"interval", "scrapeTimeout"} {
		if s := str(e.vals, "serviceMonitor."+k); s != "" {
			want[k] = s
		}
	}
	e.equal("the ServiceMonitor's endpoint", ep, want)
}

// queues checks the Queues and the ResourceSchedule; a rendering that
// makes no ResourceSchedule has none in its files (another rendering's may
// be on the server).
func (e *expect) queues(dir string) {
	e.a.t.Helper()
	qs, _ := e.val("queues").([]any)
	for _, q := range qs {
		qm := q.(map[string]any)
		u := e.a.get(queueObjects, "", fmt.Sprint(qm["name"]))
		if u == nil {
			e.errorf("no Queue %v", qm["name"])
			continue
		}
		spec := map[string]any{}
		for k, v := range qm {
			if k != "name" {
				spec[k] = v
			}
		}
		e.optional("Queue "+u.GetName()+"'s spec", field(u, "spec"), spec)
	}
	create := e.val("resourceSchedule.create") == true
	rendered, err := os.ReadFile(filepath.Join(dir, "20-queues.yaml"))
	if err != nil && (create || len(qs) > 0) {
		e.errorf("20-queues.yaml: %v", err)
	}
	if has := strings.Contains(string(rendered), "kind: ResourceSchedule"); has != create {
		e.errorf("resourceSchedule.create %v, but the rendering has a ResourceSchedule: %v", create, has)
	}
	if !create {
		return
	}
	rs := e.a.get(schedules, "", "default")
	if rs == nil {
		e.errorf("no ResourceSchedule default")
		return
	}
	spec := map[string]any{}
	for _, k := range []string{"priorityTiers", "policy", "namespaceQueues"} {
		if v := e.val("resourceSchedule." + k); !isEmpty(v) {
			spec[k] = v
		}
	}
	e.optional("the ResourceSchedule's spec", field(rs, "spec"), spec)
}
