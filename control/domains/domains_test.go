package domains_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const secretKey = "0123456789abcdef"

// setup is a service with keys k1..k9 and default key k1 on a fresh
// database with tenants acme and other.
func setup(t *testing.T) (*domains.Service, *postgres.Store, int64, int64) {
	t.Helper()
	var file strings.Builder
	for _, n := range []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"} {
		file.WriteString(n + " " + base64.StdEncoding.EncodeToString([]byte(secretKey)) + "\n")
	}
	keys, err := ff1.ParseKeys(strings.NewReader(file.String()))
	if err != nil {
		t.Fatal(err)
	}
	st := postgres.New(pgtest.Pool(t))
	ctx := context.Background()
	acme, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	other, err := st.CreateTenant(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.EnsureDefaultDomain(ctx, "s.edgelink.test"); err != nil {
		t.Fatal(err)
	}
	return domains.New(st, domains.Config{Keys: keys, DefaultKey: "k1"}), st, acme, other
}

func TestCreateValidates(t *testing.T) {
	svc, _, acme, _ := setup(t)
	ctx := context.Background()
	d, err := svc.Create(ctx, acme, domains.Input{Host: "Go.ACME.test.", RootRedirect: "HTTPS://acme.example", Robots: "User-agent: *\nAllow: /\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := link.Domain{ID: d.ID, Host: "go.acme.test", TenantID: acme, RootRedirect: "https://acme.example/", Robots: "User-agent: *\nAllow: /\n",
		CodeMode: link.CodesFF1, KeyIDs: []string{"k1"}, Status: link.DomainActive, Version: d.Version}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	seq, err := svc.Create(ctx, acme, domains.Input{Host: "seq.acme.test", CodeMode: link.CodesSequential})
	if err != nil {
		t.Fatal(err)
	}
	if seq.CodeMode != link.CodesSequential || seq.KeyIDs != nil {
		t.Errorf("sequential domain %+v: want no keys", seq)
	}
	for name, tc := range map[string]struct {
		tenant int64
		in     domains.Input
		want   error
		says   string
	}{
		"operator":        {0, domains.Input{Host: "op.test"}, link.ErrInvalidInput, "tenant"},
		"bad host":        {acme, domains.Input{Host: "not a host"}, link.ErrInvalidInput, "host"},
		"taken":           {acme, domains.Input{Host: "go.acme.test"}, link.ErrDomainTaken, ""},
		"platform's host": {acme, domains.Input{Host: "s.edgelink.test"}, link.ErrDomainTaken, ""},
		"bad mode":        {acme, domains.Input{Host: "m.test", CodeMode: "rot13"}, link.ErrInvalidInput, "code_mode"},
		"unknown key":     {acme, domains.Input{Host: "k.test", KeyID: "nope"}, link.ErrInvalidInput, "not in control's key file"},
		"key on seq":      {acme, domains.Input{Host: "k.test", CodeMode: link.CodesSequential, KeyID: "k1"}, link.ErrInvalidInput, "ff1 domains only"},
		"ipv6 ff1":        {acme, domains.Input{Host: "[::1]"}, link.ErrInvalidInput, "sequential"},
		"bad redirect":    {acme, domains.Input{Host: "r.test", NotFoundRedirect: "javascript:alert(1)"}, link.ErrInvalidInput, "not_found_redirect"},
		"long robots":     {acme, domains.Input{Host: "r.test", Robots: strings.Repeat("a", link.MaxRobotsLen+1)}, link.ErrInvalidInput, "robots"},
		"control robots":  {acme, domains.Input{Host: "r.test", Robots: "a\x00b"}, link.ErrInvalidInput, "control character"},
	} {
		_, err := svc.Create(ctx, tc.tenant, tc.in)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: Create(%+v) = %v; want %v saying %q", name, tc.in, err, tc.want, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), secretKey) {
			t.Errorf("%s: the error shows key bytes: %v", name, err)
		}
	}
	noDefault := domains.New(nil, domains.Config{})
	if _, err := noDefault.Create(ctx, acme, domains.Input{Host: "x.test"}); !errors.Is(err, link.ErrInvalidInput) || !strings.Contains(err.Error(), "--domain-key") {
		t.Errorf("ff1 domain without any key: %v; want ErrInvalidInput naming --domain-key", err)
	}
}

func TestUpdateRotateRemove(t *testing.T) {
	svc, _, acme, other := setup(t)
	ctx := context.Background()
	d, err := svc.Create(ctx, acme, domains.Input{Host: "go.acme.test", NotFoundRedirect: "https://acme.example/404"})
	if err != nil {
		t.Fatal(err)
	}
	root := "https://acme.example/"
	empty := ""
	up, err := svc.Update(ctx, acme, "GO.acme.test", domains.Patch{RootRedirect: &root, NotFoundRedirect: &empty})
	if err != nil {
		t.Fatal(err)
	}
	if up.RootRedirect != root || up.NotFoundRedirect != "" || up.Version <= d.Version {
		t.Errorf("updated %+v; want the root redirect set, the not-found one cleared, a newer version", up)
	}
	// Rotation keeps the old keys behind the new, newest first, at most
	// link.MaxKeyIDs.
	for _, k := range []string{"k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k3"} {
		if up, err = svc.Update(ctx, acme, "go.acme.test", domains.Patch{KeyID: &k}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"k3", "k9", "k8", "k7", "k6", "k5", "k4", "k2"}; !cmp.Equal(up.KeyIDs, want) {
		t.Errorf("keys after rotations %v, want %v", up.KeyIDs, want)
	}
	bad := "nope"
	if _, err := svc.Update(ctx, acme, "go.acme.test", domains.Patch{KeyID: &bad}); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("rotate to an unknown key: %v, want ErrInvalidInput", err)
	}
	if cur, _ := svc.Get(ctx, acme, "go.acme.test"); cur.Version != up.Version {
		t.Errorf("a refused rotation wrote version %d (was %d)", cur.Version, up.Version)
	}
	if _, err := svc.Update(ctx, acme, "go.acme.test", domains.Patch{}); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("empty patch: %v, want ErrInvalidInput", err)
	}
	// Another tenant sees nothing of it; the operator may change any
	// domain, the platform's redirects included, never its keys.
	for name, call := range map[string]func() error{
		"get": func() error { _, err := svc.Get(ctx, other, "go.acme.test"); return err },
		"update": func() error {
			_, err := svc.Update(ctx, other, "go.acme.test", domains.Patch{RootRedirect: &root})
			return err
		},
		"remove": func() error { _, err := svc.Remove(ctx, other, "go.acme.test"); return err },
		"platform update by a tenant": func() error {
			_, err := svc.Update(ctx, acme, "s.edgelink.test", domains.Patch{RootRedirect: &root})
			return err
		},
	} {
		if err := call(); !errors.Is(err, link.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if p, err := svc.Update(ctx, 0, "s.edgelink.test", domains.Patch{RootRedirect: &root}); err != nil || p.RootRedirect != root {
		t.Errorf("operator sets the platform's root redirect: %+v, %v", p, err)
	}
	k := "k2"
	if _, err := svc.Update(ctx, 0, "s.edgelink.test", domains.Patch{KeyID: &k}); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("a key for the sequential platform domain: %v, want ErrInvalidInput", err)
	}
	if _, err := svc.Remove(ctx, 0, "s.edgelink.test"); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("removing the platform's domain: %v, want ErrInvalidInput", err)
	}
	if p, err := svc.Get(ctx, acme, "s.edgelink.test"); err != nil || p.ID != link.DefaultDomain {
		t.Errorf("a tenant reads the platform's domain: %+v, %v", p, err)
	}

	rm, err := svc.Remove(ctx, acme, "go.acme.test")
	if err != nil {
		t.Fatal(err)
	}
	if rm.Status != link.DomainRemoved || rm.Version <= up.Version {
		t.Errorf("removed %+v", rm)
	}
	again, err := svc.Remove(ctx, acme, "go.acme.test")
	if err != nil || again.Version != rm.Version {
		t.Errorf("removing again: %+v, %v; want no change", again, err)
	}
	if _, err := svc.Update(ctx, acme, "go.acme.test", domains.Patch{RootRedirect: &root}); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("changing a removed domain: %v, want ErrInvalidInput", err)
	}
	if _, err := svc.Create(ctx, acme, domains.Input{Host: "go.acme.test"}); !errors.Is(err, link.ErrDomainTaken) {
		t.Errorf("a removed domain's host again: %v, want ErrDomainTaken (its links keep it)", err)
	}
}

func TestList(t *testing.T) {
	svc, _, acme, other := setup(t)
	ctx := context.Background()
	for _, in := range []struct {
		tenant int64
		host   string
	}{{acme, "b.acme.test"}, {other, "other.test"}, {acme, "a.acme.test"}} {
		if _, err := svc.Create(ctx, in.tenant, domains.Input{Host: in.host}); err != nil {
			t.Fatal(err)
		}
	}
	hosts := func(ds []link.Domain) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Host)
		}
		return out
	}
	mine, err := svc.List(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"b.acme.test", "a.acme.test", "s.edgelink.test"}; !cmp.Equal(hosts(mine), want) {
		t.Errorf("acme's list %v, want %v (its own in creation order, then the platform's)", hosts(mine), want)
	}
	all, err := svc.List(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s.edgelink.test", "b.acme.test", "other.test", "a.acme.test"}; !cmp.Equal(hosts(all), want) {
		t.Errorf("the operator's list %v, want %v", hosts(all), want)
	}
}
