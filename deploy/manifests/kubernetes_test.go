package manifests_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/shared/link"
)

// cluster is the decoded output of `kubectl kustomize deploy/kubernetes`.
type cluster struct {
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	services   map[string]*corev1.Service
	pdbs       map[string]*policyv1.PodDisruptionBudget
	workloads  []*workload
	namespaces []string
}

// workload is anything with a pod template.
type workload struct {
	kind, name string
	replicas   int32
	selector   *metav1.LabelSelector // nil for a Job
	template   *corev1.PodTemplateSpec
	sts        *appsv1.StatefulSet
}

func (w *workload) String() string { return w.kind + "/" + w.name }

// kinds are the objects the manifests may hold, by apiVersion and kind. A
// new kind must be added here, with its Go type, to be validated at all.
var kinds = map[string]func() any{
	"v1/Namespace":                  func() any { return &corev1.Namespace{} },
	"v1/ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                     func() any { return &corev1.Secret{} },
	"v1/Service":                    func() any { return &corev1.Service{} },
	"apps/v1/Deployment":            func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":           func() any { return &appsv1.StatefulSet{} },
	"batch/v1/Job":                  func() any { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
}

// render runs kustomize as `kubectl apply -k` does, then decodes every
// object strictly: an unknown or misspelt field, a wrong type, an invalid
// quantity or a duplicate key is an error.
func render(t testing.TB, dir string) (*cluster, problems) {
	t.Helper()
	var p problems
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, problems{fmt.Sprintf("kustomize build %s: %v", dir, err)}
	}
	c := &cluster{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		services: map[string]*corev1.Service{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	for _, res := range resMap.Resources() {
		raw, err := res.AsYAML()
		if err != nil {
			t.Fatalf("%s: %v", res.CurId(), err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(raw, &tm); err != nil {
			t.Fatalf("%s: %v", res.CurId(), err)
		}
		newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			p.add("%s: apiVersion %q kind %q is not one this test knows (add it to kinds)", res.CurId(), tm.APIVersion, tm.Kind)
			continue
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			p.add("%s %s: %v", tm.Kind, res.GetName(), err)
			continue
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			c.namespaces = append(c.namespaces, o.Name)
		case *corev1.ConfigMap:
			c.configMaps[o.Name] = o
		case *corev1.Secret:
			c.secrets[o.Name] = o
		case *corev1.Service:
			c.services[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			c.pdbs[o.Name] = o
		case *appsv1.Deployment:
			c.workloads = append(c.workloads, &workload{kind: "Deployment", name: o.Name, replicas: deref(o.Spec.Replicas, 1),
				selector: o.Spec.Selector, template: &o.Spec.Template})
		case *appsv1.StatefulSet:
			c.workloads = append(c.workloads, &workload{kind: "StatefulSet", name: o.Name, replicas: deref(o.Spec.Replicas, 1),
				selector: o.Spec.Selector, template: &o.Spec.Template, sts: o})
		case *batchv1.Job:
			c.workloads = append(c.workloads, &workload{kind: "Job", name: o.Name, replicas: 1, template: &o.Spec.Template})
		}
		p = append(p, validateMeta(tm.Kind, obj)...)
	}
	return c, p
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// validateMeta applies apimachinery's own rules for names and labels.
func validateMeta(kind string, obj any) (p problems) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil
	}
	nameCheck := validation.IsDNS1123Subdomain
	if kind == "Service" || kind == "Namespace" {
		nameCheck = validation.IsDNS1035Label
	}
	for _, msg := range nameCheck(m.GetName()) {
		p.add("%s %q: name: %s", kind, m.GetName(), msg)
	}
	for _, err := range metavalidation.ValidateLabels(m.GetLabels(), field.NewPath("metadata", "labels")) {
		p.add("%s %q: %v", kind, m.GetName(), err)
	}
	return p
}

func kubernetesDir(t testing.TB) string { return filepath.Join(repoRoot(t), "deploy", "kubernetes") }

// checkSchema: the API server's structural rules that the Go types cannot
// carry (selectors match templates, names, ports, probe handlers...).
func checkSchema(c *cluster) (p problems) {
	if len(c.namespaces) != 1 {
		p.add("namespaces = %v, want exactly one", c.namespaces)
	}
	for _, w := range c.workloads {
		if w.selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(w.selector)
			if err != nil {
				p.add("%s: selector: %v", w, err)
			} else if !sel.Matches(labels.Set(w.template.Labels)) {
				// The API server refuses this ("selector does not match template labels").
				p.add("%s: selector %v does not match its template's labels %v", w, sel, w.template.Labels)
			}
		}
		spec := &w.template.Spec
		for _, ct := range allContainers(spec) {
			where := fmt.Sprintf("%s container %s", w, ct.Name)
			for _, msg := range validation.IsDNS1123Label(ct.Name) {
				p.add("%s: name: %s", where, msg)
			}
			ports := map[string]bool{}
			for _, port := range ct.Ports {
				if port.Name != "" {
					for _, msg := range validation.IsValidPortName(port.Name) {
						p.add("%s: port %q: %s", where, port.Name, msg)
					}
					ports[port.Name] = true
				}
				for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
					p.add("%s: port %d: %s", where, port.ContainerPort, msg)
				}
			}
			for _, e := range ct.Env {
				for _, msg := range validation.IsEnvVarName(e.Name) {
					p.add("%s: env %q: %s", where, e.Name, msg)
				}
			}
			for name, pr := range probes(&ct) {
				if pr == nil {
					continue
				}
				if n := countHandlers(pr.ProbeHandler); n != 1 {
					p.add("%s: %s probe has %d handlers, want 1", where, name, n)
				}
				if pr.HTTPGet != nil && pr.HTTPGet.Port.StrVal != "" && !ports[pr.HTTPGet.Port.StrVal] {
					p.add("%s: %s probe port %q is not a port of the container", where, name, pr.HTTPGet.Port.StrVal)
				}
			}
			mounts := map[string]bool{}
			for _, v := range spec.Volumes {
				mounts[v.Name] = true
			}
			if w.sts != nil {
				for _, pvc := range w.sts.Spec.VolumeClaimTemplates {
					mounts[pvc.Name] = true
				}
			}
			for _, m := range ct.VolumeMounts {
				if !mounts[m.Name] {
					p.add("%s: volume mount %q names no volume", where, m.Name)
				}
			}
		}
	}
	for _, cm := range c.configMaps {
		for k := range cm.Data {
			for _, msg := range validation.IsConfigMapKey(k) {
				p.add("ConfigMap %s: key %q: %s", cm.Name, k, msg)
			}
		}
	}
	for _, pdb := range c.pdbs {
		if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
			p.add("PodDisruptionBudget %s: set exactly one of minAvailable and maxUnavailable", pdb.Name)
		}
	}
	return p
}

func allContainers(spec *corev1.PodSpec) []corev1.Container {
	return append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
}

func probes(ct *corev1.Container) map[string]*corev1.Probe {
	return map[string]*corev1.Probe{"startup": ct.StartupProbe, "readiness": ct.ReadinessProbe, "liveness": ct.LivenessProbe}
}

func countHandlers(h corev1.ProbeHandler) int {
	n := 0
	for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil} {
		if set {
			n++
		}
	}
	return n
}

// checkOperable: the rules an operator relies on, which no
// schema states. Every long-running container has the three probes, and
// every container requests and limits CPU and memory; pods run as non-root
// with a read-only root file system, no privilege escalation and no
// capabilities (the namespace enforces Pod Security "restricted").
func checkOperable(c *cluster) (p problems) {
	for _, w := range c.workloads {
		spec := &w.template.Spec
		psc := spec.SecurityContext
		if psc == nil || !deref(psc.RunAsNonRoot, false) || deref(psc.RunAsUser, 0) == 0 {
			p.add("%s: the pod must set runAsNonRoot and a non-zero runAsUser", w)
		}
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			p.add("%s: the pod must use the RuntimeDefault seccomp profile", w)
		}
		if deref(spec.AutomountServiceAccountToken, true) {
			p.add("%s: nothing here talks to the API server: set automountServiceAccountToken: false", w)
		}
		for _, ct := range allContainers(spec) {
			where := fmt.Sprintf("%s container %s", w, ct.Name)
			long := w.kind != "Job" && !slices.ContainsFunc(spec.InitContainers, func(i corev1.Container) bool { return i.Name == ct.Name })
			if long {
				for name, pr := range probes(&ct) {
					if pr == nil {
						p.add("%s: no %s probe", where, name)
					}
				}
			}
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, okReq := ct.Resources.Requests[res]
				lim, okLim := ct.Resources.Limits[res]
				switch {
				case !okReq || !okLim:
					p.add("%s: %s needs both a request and a limit", where, res)
				case req.Cmp(lim) > 0:
					p.add("%s: %s request %s above its limit %s", where, res, req.String(), lim.String())
				}
			}
			sc := ct.SecurityContext
			switch {
			case sc == nil:
				p.add("%s: no securityContext", where)
			case deref(sc.AllowPrivilegeEscalation, true):
				p.add("%s: allowPrivilegeEscalation must be false", where)
			case !deref(sc.ReadOnlyRootFilesystem, false):
				p.add("%s: readOnlyRootFilesystem must be true (mount an emptyDir where it writes)", where)
			case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
				p.add("%s: capabilities must drop ALL", where)
			}
		}
	}
	return p
}

// checkReferences: Services and PodDisruptionBudgets select
// pods that exist (and a Service's named target ports are theirs); every
// StatefulSet's governing Service exists; every ConfigMap, Secret and key a
// pod reads exists; every $(VAR) in args and env resolves.
func checkReferences(c *cluster) (p problems) {
	selected := func(sel labels.Selector) []*workload {
		var out []*workload
		for _, w := range c.workloads {
			if w.kind != "Job" && !sel.Empty() && sel.Matches(labels.Set(w.template.Labels)) {
				out = append(out, w)
			}
		}
		return out
	}
	for _, svc := range c.services {
		ws := selected(labels.SelectorFromSet(svc.Spec.Selector))
		if len(ws) == 0 {
			p.add("Service %s: selector %v matches no pod template", svc.Name, svc.Spec.Selector)
		}
		for _, sp := range svc.Spec.Ports {
			if name := sp.TargetPort.StrVal; name != "" {
				for _, w := range ws {
					if !hasPort(w.template, name) {
						p.add("Service %s: target port %q is not a container port of %s", svc.Name, name, w)
					}
				}
			}
		}
	}
	for _, pdb := range c.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			p.add("PodDisruptionBudget %s: %v", pdb.Name, err)
			continue
		}
		if len(selected(sel)) == 0 {
			p.add("PodDisruptionBudget %s: selector %v matches no pod template", pdb.Name, sel)
		}
	}
	for _, w := range c.workloads {
		if w.sts != nil {
			if _, ok := c.services[w.sts.Spec.ServiceName]; !ok {
				p.add("%s: serviceName %q is no Service", w, w.sts.Spec.ServiceName)
			}
		}
		for _, v := range w.template.Spec.Volumes {
			if v.ConfigMap != nil {
				cm, ok := c.configMaps[v.ConfigMap.Name]
				if !ok {
					p.add("%s: volume %s: no ConfigMap %q", w, v.Name, v.ConfigMap.Name)
					continue
				}
				for _, item := range v.ConfigMap.Items {
					if _, ok := cm.Data[item.Key]; !ok {
						p.add("%s: volume %s: ConfigMap %s has no key %q", w, v.Name, cm.Name, item.Key)
					}
				}
			}
		}
		for _, ct := range allContainers(&w.template.Spec) {
			if _, err := c.containerEnv(ct); err != nil {
				p.add("%s container %s: %v", w, ct.Name, err)
			}
		}
	}
	return p
}

func hasPort(tpl *corev1.PodTemplateSpec, name string) bool {
	for _, ct := range tpl.Spec.Containers {
		for _, p := range ct.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// containerEnv is the environment a container starts with, as the kubelet
// builds it: envFrom first, then env in order, each value's $(VAR) expanded
// from what is defined before it. Values only known at run time get a
// stand-in of the right shape.
func (c *cluster) containerEnv(ct corev1.Container) (map[string]string, error) {
	env := map[string]string{}
	for _, from := range ct.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, ok := c.configMaps[from.ConfigMapRef.Name]
			if !ok {
				return nil, fmt.Errorf("envFrom: no ConfigMap %q", from.ConfigMapRef.Name)
			}
			for k, v := range cm.Data {
				env[from.Prefix+k] = v
			}
		case from.SecretRef != nil:
			s, ok := c.secrets[from.SecretRef.Name]
			if !ok {
				return nil, fmt.Errorf("envFrom: no Secret %q", from.SecretRef.Name)
			}
			for k, v := range secretData(s) {
				env[from.Prefix+k] = v
			}
		}
	}
	for _, e := range ct.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			var missing []string
			v = varRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
				name := varRef.FindStringSubmatch(ref)[1]
				val, ok := env[name]
				if !ok {
					missing = append(missing, name)
				}
				return val
			})
			if missing != nil {
				// The kubelet would pass "$(NAME)" on literally.
				return nil, fmt.Errorf("env %s: $(%s) is not defined before it", e.Name, strings.Join(missing, ", "))
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, ok := c.secrets[ref.Name]
			if !ok {
				return nil, fmt.Errorf("env %s: no Secret %q", e.Name, ref.Name)
			}
			if v, ok = secretData(s)[ref.Key]; !ok {
				return nil, fmt.Errorf("env %s: Secret %s has no key %q", e.Name, ref.Name, ref.Key)
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, ok := c.configMaps[ref.Name]
			if !ok {
				return nil, fmt.Errorf("env %s: no ConfigMap %q", e.Name, ref.Name)
			}
			if v, ok = cm.Data[ref.Key]; !ok {
				return nil, fmt.Errorf("env %s: ConfigMap %s has no key %q", e.Name, ref.Name, ref.Key)
			}
		case e.ValueFrom.FieldRef != nil:
			v = "edge-7f9c6d5b8-x2x4q" // a pod's name, the only field used
		case e.ValueFrom.ResourceFieldRef != nil:
			v = "1073741824"
		}
		env[e.Name] = v
	}
	for _, s := range append(append([]string(nil), ct.Command...), ct.Args...) {
		for _, m := range varRef.FindAllStringSubmatch(s, -1) {
			if _, ok := env[m[1]]; !ok {
				return nil, fmt.Errorf("argument %q: $(%s) is not in the container's environment", s, m[1])
			}
		}
	}
	return env, nil
}

func secretData(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	for k, v := range s.StringData {
		out[k] = v
	}
	return out
}

func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string { return env[varRef.FindStringSubmatch(ref)[1]] })
}

// edgelinkContainer is a container running control or edge.
type edgelinkContainer struct {
	w          *workload
	ct         corev1.Container
	image, tag string
}

func (c *cluster) edgelinkContainers(t testing.TB) []edgelinkContainer {
	t.Helper()
	var out []edgelinkContainer
	for _, w := range c.workloads {
		for _, ct := range allContainers(&w.template.Spec) {
			if name, tag := imageName(ct.Image); strings.Contains(name, "edgelink") {
				out = append(out, edgelinkContainer{w, ct, name, tag})
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no container runs an edgelink image")
	}
	return out
}

// checkCommandLines: every command line and EDGELINK_* variable
// given to control or edge is parsed by the real binary; images are named
// consistently (edgelink/control, edgelink/edge, one tag for both, the one
// the kustomization sets); control runs as a Deployment of at least two
// and edges as one of at least three.
func checkCommandLines(t testing.TB, c *cluster) (p problems) {
	tags := map[string]bool{}
	replicas := map[string]int32{}
	for _, e := range c.edgelinkContainers(t) {
		where := fmt.Sprintf("%s container %s", e.w, e.ct.Name)
		if _, ok := binaries[e.image]; !ok {
			p.add("%s: image %q is neither edgelink/control nor edgelink/edge", where, e.ct.Image)
			continue
		}
		tags[e.tag] = true
		if len(e.ct.Command) > 0 {
			p.add("%s: command %v overrides the image's entrypoint; give args only", where, e.ct.Command)
		}
		env, err := c.containerEnv(e.ct)
		if err != nil {
			p.add("%s: %v", where, err)
			continue
		}
		args := make([]string, len(e.ct.Args))
		for i, a := range e.ct.Args {
			args[i] = expand(a, env)
		}
		p = append(p, checkInvocation(t, invocation{where: where, image: e.image, args: args, env: env})...)
		if e.w.kind == "Deployment" {
			replicas[e.image] = e.w.replicas
		}
	}
	if len(tags) != 1 {
		p.add("edgelink images carry tags %v; want one tag for control and edge", keys(tags))
	}
	if replicas["edgelink/control"] < 2 {
		p.add("control runs %d replicas in a Deployment, want at least 2", replicas["edgelink/control"])
	}
	if replicas["edgelink/edge"] < 3 {
		p.add("edge runs %d replicas in a Deployment, want at least 3", replicas["edgelink/edge"])
	}
	return p
}

// checkServed: the probe and scrape paths of
// control and edge are ones the binaries serve, on the port they listen on.
// control's come from its route table (api.Routes); the edge answers its
// own paths before treating a path as a code (link.EdgeRoutes), and its
// handler names them.
func checkServed(t testing.TB, c *cluster) (p problems) {
	served := map[string]func(path string) bool{
		"edgelink/control": controlServes,
		"edgelink/edge":    edgeServes(t),
	}
	// The edge's own paths are under /-/, where no code can be.
	want := map[string]map[string]string{
		"edgelink/control": {"startup": "/startupz", "readiness": "/readyz", "liveness": "/livez"},
		"edgelink/edge":    {"startup": "/-/startupz", "readiness": "/-/readyz", "liveness": "/-/livez"},
	}
	for _, e := range c.edgelinkContainers(t) {
		if e.w.kind == "Job" {
			continue
		}
		where := fmt.Sprintf("%s container %s", e.w, e.ct.Name)
		env, err := c.containerEnv(e.ct)
		if err != nil {
			p.add("%s: %v", where, err)
			continue
		}
		port, err := listenPort(e.ct.Args, env)
		if err != nil {
			p.add("%s: %v", where, err)
			continue
		}
		for kind, pr := range probes(&e.ct) {
			if pr == nil || pr.HTTPGet == nil {
				p.add("%s: %s probe is not an HTTP GET", where, kind)
				continue
			}
			if w := want[e.image][kind]; pr.HTTPGet.Path != w {
				p.add("%s: %s probe path %q, want %q", where, kind, pr.HTTPGet.Path, w)
			}
			if !served[e.image](pr.HTTPGet.Path) {
				p.add("%s: %s probe path %q is not served by %s", where, kind, pr.HTTPGet.Path, e.image)
			}
			if got := containerPort(e.ct, pr.HTTPGet.Port.StrVal, pr.HTTPGet.Port.IntVal); got != port {
				p.add("%s: %s probe on port %d, but the binary listens on %d", where, kind, got, port)
			}
		}
		ann := e.w.template.Annotations
		if ann["prometheus.io/scrape"] != "true" {
			p.add("%s: no prometheus.io/scrape annotation", where)
		}
		if ann["prometheus.io/port"] != strconv.Itoa(port) {
			p.add("%s: prometheus.io/port %q, but the binary listens on %d", where, ann["prometheus.io/port"], port)
		}
		if path := ann["prometheus.io/path"]; !served[e.image](path) {
			p.add("%s: prometheus.io/path %q is not served by %s", where, path, e.image)
		}
	}
	return p
}

// controlServes reports whether a path is in control's route table.
func controlServes(p string) bool { return slices.Contains(api.Routes, strings.TrimPrefix(p, "/")) }

// edgeServes reports whether the edge answers a path itself: it must be one
// of link.EdgeRoutes and appear as a path in the handler's source.
func edgeServes(t testing.TB) func(string) bool {
	lits := stringLiterals(t, filepath.Join(repoRoot(t), "edge", "redirect"))
	return func(p string) bool {
		return slices.Contains(link.EdgeRoutes, p) && lits[p]
	}
}

// listenPort is the port of the --listen flag (":8080"), or of its
// environment variable.
func listenPort(args []string, env map[string]string) (int, error) {
	addr := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(expand(a, env), "--listen="); ok {
			addr = v
		}
	}
	if addr == "" {
		return 0, fmt.Errorf("no --listen flag: the binaries' defaults listen on 127.0.0.1 only")
	}
	host, port, ok := strings.Cut(addr, ":")
	n, err := strconv.Atoi(port)
	if !ok || err != nil || host != "" {
		return 0, fmt.Errorf("--listen=%s: want :PORT, on every interface", addr)
	}
	return n, nil
}

func containerPort(ct corev1.Container, name string, num int32) int {
	if name == "" {
		return int(num)
	}
	for _, p := range ct.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	return -1
}

// checkWiring: the addresses in the settings point where they
// should. The NATS cluster's routes name its own pods; control's streams
// have as many replicas as NATS has servers; the DSNs and the NATS URL name
// Services that select the right pods.
func checkWiring(t testing.TB, c *cluster) (p problems) {
	var nats *workload
	for _, w := range c.workloads {
		if w.kind == "StatefulSet" && w.name == "nats" {
			nats = w
		}
	}
	if nats == nil {
		p.add("no StatefulSet nats")
		return p
	}
	if nats.replicas != 3 {
		p.add("NATS runs %d servers, want 3", nats.replicas)
	}
	var conf string
	if cm := c.configMaps["nats-config"]; cm != nil {
		conf = cm.Data["nats.conf"]
	}
	var routes []string
	for _, m := range regexp.MustCompile(`nats://([a-z0-9.-]+):6222`).FindAllStringSubmatch(conf, -1) {
		routes = append(routes, m[1])
	}
	var wantRoutes []string
	for i := range nats.replicas {
		wantRoutes = append(wantRoutes, fmt.Sprintf("%s-%d.%s", nats.name, i, nats.sts.Spec.ServiceName))
	}
	if fmt.Sprint(routes) != fmt.Sprint(wantRoutes) {
		p.add("nats.conf routes %v, want %v (one per pod, through the governing Service)", routes, wantRoutes)
	}
	if svc := c.services[nats.sts.Spec.ServiceName]; svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		p.add("Service %s must be headless and publish not-ready addresses, or the cluster cannot form", nats.sts.Spec.ServiceName)
	}
	if !strings.Contains(conf, "jetstream") {
		p.add("nats.conf does not enable JetStream")
	}

	// The Service named by a URL's host must select the expected workload
	// and expose the URL's port.
	serviceFor := func(rawURL, where string) *workload {
		u, err := url.Parse(strings.Split(rawURL, ",")[0])
		if err != nil {
			p.add("%s: %q: %v", where, rawURL, err)
			return nil
		}
		svc, ok := c.services[u.Hostname()]
		if !ok {
			p.add("%s: host %q of %q is no Service", where, u.Hostname(), rawURL)
			return nil
		}
		port, _ := strconv.Atoi(u.Port())
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == port }) {
			p.add("%s: Service %s has no port %d", where, svc.Name, port)
		}
		for _, w := range c.workloads {
			if w.kind != "Job" && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.template.Labels)) {
				return w
			}
		}
		return nil
	}
	for _, e := range c.edgelinkContainers(t) {
		where := fmt.Sprintf("%s container %s", e.w, e.ct.Name)
		env, err := c.containerEnv(e.ct)
		if err != nil {
			p.add("%s: %v", where, err)
			continue
		}
		wantTargets := map[string]string{
			"EDGELINK_NATS_URL":     "nats",
			"EDGELINK_DATABASE_URL": "postgres-primary",
			"EDGELINK_REPLICA_URL":  "postgres-replica",
		}
		for name, target := range wantTargets {
			v, ok := env[name]
			if !ok {
				continue
			}
			if w := serviceFor(v, where+" "+name); w != nil && w.name != target {
				p.add("%s: %s reaches %s, want %s", where, name, w, target)
			}
		}
		if e.image == "edgelink/control" && e.w.kind == "Deployment" {
			if got := env["EDGELINK_STREAM_REPLICAS"]; got != strconv.Itoa(int(nats.replicas)) {
				p.add("%s: EDGELINK_STREAM_REPLICAS = %q, want %d (one replica per NATS server)", where, got, nats.replicas)
			}
			if _, ok := env["EDGELINK_REPLICA_URL"]; !ok {
				p.add("%s: no EDGELINK_REPLICA_URL: edges' lookups would all load the primary", where)
			}
		}
		if _, ok := env["EDGELINK_NATS_URL"]; !ok && e.w.kind != "Job" {
			p.add("%s: no EDGELINK_NATS_URL: the default is 127.0.0.1", where)
		}
		if e.image == "edgelink/edge" {
			if _, ok := env["EDGELINK_DATABASE_URL"]; ok {
				p.add("%s: edges need no database credentials", where)
			}
		}
	}
	return p
}

// kubernetesChecks are every check of the rendered manifests.
var kubernetesChecks = []struct {
	name  string
	check func(testing.TB, *cluster) problems
}{
	{"Schema", func(_ testing.TB, c *cluster) problems { return checkSchema(c) }},
	{"PodsAreOperable", func(_ testing.TB, c *cluster) problems { return checkOperable(c) }},
	{"ReferencesResolve", func(_ testing.TB, c *cluster) problems { return checkReferences(c) }},
	{"CommandLines", checkCommandLines},
	{"ProbesAndMetricsAreServed", checkServed},
	{"Wiring", checkWiring},
	{"CodeKeys", checkCodeKeys},
	{"CountryData", checkGeoIP},
}

// TestKubernetes renders deploy/kubernetes as `kubectl apply -k` would and
// runs every check on it.
func TestKubernetes(t *testing.T) {
	c, p := render(t, kubernetesDir(t))
	if c == nil {
		p.report(t)
		t.FailNow()
	}
	t.Run("Decode", func(t *testing.T) { p.report(t) })
	for _, ck := range kubernetesChecks {
		t.Run(ck.name, func(t *testing.T) { ck.check(t, c).report(t) })
	}
}

// TestKubernetesChecksCatchMistakes breaks a copy of the manifests in one
// place at a time and expects the checks to say so: a check that cannot
// fail proves nothing.
func TestKubernetesChecksCatchMistakes(t *testing.T) {
	mutations := []struct {
		name, file, old, new, want string
	}{
		{"misspelt field", "control.yaml", "readinessProbe:", "readinessProbes:", `json: unknown field "readinessProbes"`},
		{"wrong type", "edge.yaml", "replicas: 3", "replicas: three", "cannot unmarshal"},
		{"bad quantity", "control.yaml", "memory: 1Gi\n", "memory: 1GB-ish\n", "quantities must match"},
		{"selector off its template", "control.yaml", "  selector:\n    matchLabels:\n      app.kubernetes.io/name: control\n  strategy:",
			"  selector:\n    matchLabels:\n      app.kubernetes.io/name: ctrl\n  strategy:", "does not match its template's labels"},
		{"probe path not served", "edge.yaml", "path: /-/startupz", "path: /-/started", `"/-/started" is not served by edgelink/edge`},
		{"old probe path: a code now", "edge.yaml", "path: /-/readyz", "path: /readyz", `readiness probe path "/readyz", want "/-/readyz"`},
		{"probe missing", "edge.yaml", "          livenessProbe:\n            httpGet:\n              path: /-/livez\n              port: http\n            periodSeconds: 10\n            timeoutSeconds: 3\n            failureThreshold: 6\n", "",
			"container edge: no liveness probe"},
		{"probe on another port", "control.yaml", `args: ["serve", "--listen=:8080"]`, `args: ["serve", "--listen=:9090"]`, "but the binary listens on 9090"},
		{"no memory limit", "edge.yaml", "              cpu: \"2\"\n              memory: 2Gi\n", "              cpu: \"2\"\n", "memory needs both a request and a limit"},
		{"writable root", "control.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem must be true"},
		{"unknown flag", "control.yaml", `args: ["serve", "--listen=:8080"]`, `args: ["serve", "--listen=:8080", "--replicas=3"]`, "unknown flag --replicas"},
		{"unknown command", "migrate.yaml", `args: ["migrate"]`, `args: ["migrations"]`, "unexpected argument migrations"},
		{"variable no binary reads", "config.yaml", "EDGELINK_STREAM_REPLICAS", "EDGELINK_NATS_REPLICAS", "sets EDGELINK_NATS_REPLICAS, which `control serve --listen=:8080 --help` does not read"},
		{"variable of the wrong type", "config.yaml", "EDGELINK_EDGE_SNAPSHOT_POLL: 30s", "EDGELINK_EDGE_SNAPSHOT_POLL: 30 seconds", "--snapshot-poll: expected duration"},
		{"undefined $(VAR)", "edge.yaml", `"--name=$(POD_NAME)"`, `"--name=$(POD)"`, "$(POD) is not in the container's environment"},
		{"PDB selects nothing", "edge.yaml", "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: edge", "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: edges",
			"PodDisruptionBudget edge: selector app.kubernetes.io/name=edges matches no pod template"},
		{"Service port not on the pods", "nats.yaml", "      port: 6222\n      targetPort: cluster", "      port: 6222\n      targetPort: routes", `Service nats-headless: target port "routes" is not a container port of StatefulSet/nats`},
		{"missing Secret key", "control.yaml", "key: POSTGRES_PASSWORD", "key: PASSWORD", "Secret postgres-credentials has no key \"PASSWORD\""},
		{"DSN to no Service", "control.yaml", "@postgres-primary:5432", "@postgres:5432", `host "postgres" of`},
		{"replica DSN to the primary", "control.yaml", "@postgres-replica:5432", "@postgres-primary:5432", "EDGELINK_REPLICA_URL reaches StatefulSet/postgres-primary, want postgres-replica"},
		{"streams fewer than servers", "config.yaml", `EDGELINK_STREAM_REPLICAS: "3"`, `EDGELINK_STREAM_REPLICAS: "1"`, `EDGELINK_STREAM_REPLICAS = "1", want 3`},
		{"route to no pod", "nats.yaml", "nats://nats-2.nats-headless:6222", "nats://nats-3.nats-headless:6222", "nats.conf routes"},
		{"images disagree", "kustomization.yaml", "  - name: edgelink/edge\n    newTag: dev", "  - name: edgelink/edge\n    newTag: v2", "edgelink images carry tags [dev v2]"},
		{"edges dropped", "kustomization.yaml", "  - edge.yaml\n", "", "edge runs 0 replicas"},
		{"unknown kind", "control.yaml", "kind: PodDisruptionBudget", "kind: PodDisruptionBudgetz", `kind "PodDisruptionBudgetz" is not one this test knows`},
		{"code keys writable", "edge.yaml", "mountPath: /etc/edgelink/keys\n              readOnly: true", "mountPath: /etc/edgelink/keys\n              readOnly: false",
			"Deployment/edge container edge: volume mount code-keys (/etc/edgelink/keys) of the code keys is writable"},
		{"control without the code keys", "control.yaml", "            - name: code-keys\n              mountPath: /etc/edgelink/keys\n              readOnly: true\n", "",
			"Deployment/control container control: EDGELINK_CODE_KEYS=/etc/edgelink/keys/code-keys is under no volume mount"},
		{"code keys where nothing is mounted", "config.yaml", "EDGELINK_CODE_KEYS: /etc/edgelink/keys/code-keys", "EDGELINK_CODE_KEYS: /etc/edgelink/code-keys",
			"EDGELINK_CODE_KEYS=/etc/edgelink/code-keys is under no volume mount"},
		{"code keys read by nobody", "config.yaml", "  EDGELINK_CODE_KEYS: /etc/edgelink/keys/code-keys\n", "", "container edge: no EDGELINK_CODE_KEYS"},
		{"a key committed", "code-keys", "#   echo ", "k2026 " + strings.Repeat("A", 43) + "=\n#   echo ", "is not a comment: the committed code key file must hold no key"},
		{"a placeholder the binaries refuse", "code-keys", "#   echo ", "k2026\n#   echo ", "want \"name base64-key\": control and the edges would refuse to start"},
		{"domain key without its key", "config.yaml", `EDGELINK_DOMAIN_KEY: ""`, `EDGELINK_DOMAIN_KEY: k2026`,
			`EDGELINK_DOMAIN_KEY names key "k2026", which Secret edgelink-code-keys-`},
		{"code keys readable by all", "edge.yaml", "secretName: edgelink-code-keys\n            defaultMode: 0440", "secretName: edgelink-code-keys\n            defaultMode: 0444",
			"Deployment/edge container edge: the code keys file has mode 0444: readable by every user"},
		{"code keys unreadable by control", "control.yaml", "        fsGroup: 65532\n", "", "Deployment/control container control: the code keys file (mode 0440, owner root) is unreadable"},
		{"edges read another file", "edge.yaml", "secretName: edgelink-code-keys\n            defaultMode: 0440",
			"secretName: postgres-credentials\n            defaultMode: 0440\n            items:\n              - key: POSTGRES_PASSWORD\n                path: code-keys",
			"control and every edge need the same file"},
		{"code keys Secret without the file", "kustomization.yaml", "      - code-keys\n", "      - keys=code-keys\n", `has no key "code-keys"`},
		{"edges without country data", "config.yaml", "  EDGELINK_EDGE_GEOIP: /usr/share/edgelink/geoip\n", "", "container edge: neither EDGELINK_EDGE_GEOIP nor EDGELINK_EDGE_GEOIP_MMDB"},
		{"country data not in the image", "config.yaml", "EDGELINK_EDGE_GEOIP: /usr/share/edgelink/geoip", "EDGELINK_EDGE_GEOIP: /usr/share/tor",
			"EDGELINK_EDGE_GEOIP=/usr/share/tor is neither the image's country data"},
		{"an .mmdb beside the image's data", "config.yaml", "EDGELINK_EDGE_GEOIP: /usr/share/edgelink/geoip", "EDGELINK_EDGE_GEOIP: /usr/share/edgelink/geoip\n  EDGELINK_EDGE_GEOIP_MMDB: /etc/edgelink/keys/x.mmdb",
			"both EDGELINK_EDGE_GEOIP and EDGELINK_EDGE_GEOIP_MMDB are set"},
	}
	src := kubernetesDir(t)
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			entries, err := os.ReadDir(src)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				// The manifests, and the files kustomize generates from.
				if !e.Type().IsRegular() {
					continue
				}
				b, err := os.ReadFile(filepath.Join(src, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if e.Name() == m.file {
					// Exactly once, so a manifest edit that moves the text
					// fails here instead of quietly testing nothing.
					if n := strings.Count(string(b), m.old); n != 1 {
						t.Fatalf("%s holds %q %d times, want once: update this mutation", m.file, m.old, n)
					}
					b = []byte(strings.Replace(string(b), m.old, m.new, 1))
				}
				if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c, found := render(t, dir)
			if c != nil {
				for _, ck := range kubernetesChecks {
					found = append(found, ck.check(t, c)...)
				}
			}
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, m.want) }) {
				t.Errorf("after %s in %s, no problem mentions %q; found:\n%s", m.name, m.file, m.want, strings.Join(found, "\n"))
			}
		})
	}
}
