package authority

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/edgelink/edgelink/shared/link"
)

// MaxHosts bounds the hosts of one question. A domain's configuration is
// at most about 13 KiB (two redirect targets and its robots.txt), so an
// answer with every host found and MaxCodes links stays below NATS's 1 MiB
// payload.
const MaxHosts = 16

// maxDomainJSON bounds one domain's encoding in an answer: well above any
// configuration control accepts, far below a message.
const maxDomainJSON = 32 << 10

// checkHosts refuses hosts a question may not carry: more than MaxHosts,
// one not in canonical form (the edge asks by the key its table is keyed
// by, and the authority compares it as it is), or one asked twice.
func checkHosts(hosts []string) error {
	if len(hosts) > MaxHosts {
		return fmt.Errorf("%w: %d hosts in one question, at most %d", errInvalid, len(hosts), MaxHosts)
	}
	for i, h := range hosts {
		if !canonical(h) {
			return fmt.Errorf("%w: host %d of %d bytes is not a canonical host", errInvalid, i, len(h))
		}
		if slices.Contains(hosts[:i], h) {
			return fmt.Errorf("%w: host %d asked twice", errInvalid, i)
		}
	}
	return nil
}

func canonical(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	c, err := link.CanonicalHost(h)
	return err == nil && c == h
}

// appendHosts writes checked hosts: a uvarint count, then each as a
// uvarint length and its bytes.
func appendHosts(dst []byte, hosts []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(hosts)))
	for _, h := range hosts {
		dst = binary.AppendUvarint(dst, uint64(len(h)))
		dst = append(dst, h...)
	}
	return dst
}

// readHosts reads what appendHosts wrote (at least one host: a format 4
// question asks some) and checks it as checkHosts does.
func readHosts(b []byte) ([]string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > MaxHosts {
		return nil, nil, fmt.Errorf("%w: host count", errInvalid)
	}
	b = b[k:]
	hosts := make([]string, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, nil, fmt.Errorf("%w: truncated host", errInvalid)
		}
		hosts = append(hosts, string(b[k:k+int(l)]))
		b = b[k+int(l):]
	}
	if err := checkHosts(hosts); err != nil {
		return nil, nil, err
	}
	return hosts, b, nil
}

// checkDomains refuses domains an answer may not carry: each must be an
// active domain an edge can serve by (canonical host, a known code mode,
// an FF1 domain with a key name), at most one per host.
func checkDomains(ds []link.Domain) error {
	if len(ds) > MaxHosts {
		return fmt.Errorf("%w: %d domains in one answer", errInvalid, len(ds))
	}
	for i := range ds {
		d := &ds[i]
		if d.ID > link.MaxDomainID || !canonical(d.Host) || !d.CodeMode.Valid() || d.Status != link.DomainActive ||
			(d.CodeMode == link.CodesFF1 && len(d.KeyIDs) == 0) || len(d.KeyIDs) > link.MaxKeyIDs {
			return fmt.Errorf("%w: domain %d of the answer: id %d, mode %q, status %q, %d key ids, host valid %v",
				errInvalid, i, d.ID, d.CodeMode, d.Status, len(d.KeyIDs), canonical(d.Host))
		}
		for j := range i {
			if ds[j].Host == d.Host || ds[j].ID == d.ID {
				return fmt.Errorf("%w: domain %d of the answer repeats another", errInvalid, i)
			}
		}
	}
	return nil
}

// appendDomains writes checked domains: a uvarint count, then each as a
// uvarint length and its JSON (link.Domain's, as on the change stream).
func appendDomains(dst []byte, ds []link.Domain) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(ds)))
	for i := range ds {
		j, err := json.Marshal(&ds[i])
		if err != nil {
			return nil, fmt.Errorf("%w: domain %d: %w", errInvalid, i, err)
		}
		if len(j) > maxDomainJSON {
			return nil, fmt.Errorf("%w: domain %d of %d bytes", errInvalid, i, len(j))
		}
		dst = binary.AppendUvarint(dst, uint64(len(j)))
		dst = append(dst, j...)
	}
	return dst, nil
}

// readDomains reads what appendDomains wrote, in answer to q: every domain
// must have a host q asked about, so an answer can never teach an edge a
// host it did not ask for.
func readDomains(b []byte, q *Question) ([]link.Domain, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > uint64(len(q.Hosts)) {
		return nil, nil, fmt.Errorf("%w: domain count", errInvalid)
	}
	b = b[k:]
	ds := make([]link.Domain, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > maxDomainJSON || l > uint64(len(b)-k) {
			return nil, nil, fmt.Errorf("%w: truncated domain", errInvalid)
		}
		var d link.Domain
		if err := json.Unmarshal(b[k:k+int(l)], &d); err != nil {
			return nil, nil, fmt.Errorf("%w: domain does not decode", errInvalid)
		}
		if !slices.Contains(q.Hosts, d.Host) {
			return nil, nil, fmt.Errorf("%w: a domain for a host not asked", errInvalid)
		}
		ds = append(ds, d)
		b = b[k+int(l):]
	}
	return ds, b, nil
}

// DomainOf returns the domain of a's Domains that has host, if any.
func (a *Answer) DomainOf(host string) (link.Domain, bool) {
	for i := range a.Domains {
		if a.Domains[i].Host == host {
			return a.Domains[i], true
		}
	}
	return link.Domain{}, false
}
