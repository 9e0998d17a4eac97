// Package catalog validates the catalog kinds, what resources are made
// of: Flavor, Image and Network (DESIGN.md, "Catalog"). It is pure: the
// kind registry calls the per-object rules, and root calls Overlaps with
// the stored networks and those of an apply.
package catalog

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/provision/ipam"
)

// ValidationError is every invalid field of one catalog object.
type ValidationError = validate.Error

// Kinds of flavor and image: what provider realizes them.
const (
	KindVM        = "vm"
	KindContainer = "container"
)

// Flavor checks a flavor: kind vm or container, vcpus at least 1, cpu
// policy shared (the default) or pinned, memory and disk as quantities,
// prices not negative.
func Flavor(f *unyov1.Flavor) error {
	var fields validate.Fields
	fields.Name("name", f.GetName())
	s := f.GetSpec()
	if s == nil {
		fields.Add("spec", "required: a flavor needs at least spec.kind, spec.vcpus and spec.memory")
		return fields.Err("flavor", f.GetName())
	}
	oneOf(&fields, "spec.kind", s.GetKind(), true, KindVM, KindContainer)
	if s.GetVcpus() < 1 {
		fields.Addf("spec.vcpus", "must be at least 1, got %d", s.GetVcpus())
	}
	oneOf(&fields, "spec.cpu_policy", s.GetCpuPolicy(), false, "shared", "pinned")
	if s.GetMemory() == "" {
		fields.Add("spec.memory", "required (a quantity such as 512Mi or 4Gi)")
	} else if _, err := ParseQuantity(s.GetMemory()); err != nil {
		fields.Add("spec.memory", err.Error())
	}
	if s.GetDisk() != "" {
		if _, err := ParseQuantity(s.GetDisk()); err != nil {
			fields.Add("spec.disk", err.Error())
		}
	}
	if c := s.GetIoClass(); c != "" && validate.Name(c) != nil {
		fields.Addf("spec.io_class", "%q is not a valid class name (such as standard or fast): %v", c, validate.Name(c))
	}
	if p := s.GetPricePerHour(); p < 0 || math.IsNaN(p) {
		fields.Addf("spec.price_per_hour", "must not be negative, got %v", p)
	}
	for model, p := range s.GetModelPrices() {
		field := fmt.Sprintf("spec.model_prices[%q]", model)
		if strings.TrimSpace(model) == "" {
			fields.Add(field, "the machine model is empty")
		}
		if p < 0 || math.IsNaN(p) {
			fields.Addf(field, "must not be negative, got %v", p)
		}
	}
	return fields.Err("flavor", f.GetName())
}

// FormatKernel is a VM image that is a directory on the node holding a
// kernel and an initramfs (provider-libvirt boots it directly), not a disk
// that is downloaded.
const FormatKernel = "kernel"

// Image formats per kind; a container image's format is empty when its
// source is an image reference.
var imageFormats = map[string][]string{
	KindVM:        {"qcow2", "raw", FormatKernel},
	KindContainer: {"", "docker-archive", "oci"},
}

var sha256RE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Image checks an image: kind vm or container, a source, a format valid
// for the kind, and a checksum "sha256:<64 hex digits>" when given (a VM
// disk must have one: it is downloaded and verified; a kernel image is a
// directory already on the node, which no checksum covers).
func Image(i *unyov1.Image) error {
	var fields validate.Fields
	fields.Name("name", i.GetName())
	s := i.GetSpec()
	if s == nil {
		fields.Add("spec", "required: an image needs at least spec.kind and spec.source")
		return fields.Err("image", i.GetName())
	}
	kindOK := oneOf(&fields, "spec.kind", s.GetKind(), true, KindVM, KindContainer)
	if strings.TrimSpace(s.GetSource()) == "" {
		fields.Add("spec.source", "required: a path or URL of a disk image, or a container image reference")
	}
	if kindOK {
		formats := imageFormats[s.GetKind()]
		if !slices.Contains(formats, s.GetFormat()) {
			fields.Addf("spec.format", "%q is not a format of a %s image (expected %s)", s.GetFormat(), s.GetKind(), listFormats(formats))
		}
	}
	switch c := s.GetChecksum(); {
	case c == "" && s.GetKind() == KindVM && s.GetFormat() != FormatKernel:
		fields.Add("spec.checksum", "required for a vm image: sha256:<64 hex digits> of the disk image")
	case c != "" && !sha256RE.MatchString(c):
		fields.Addf("spec.checksum", "%q is not a checksum: expected sha256: and 64 lowercase hex digits", c)
	}
	return fields.Err("image", i.GetName())
}

// Network scopes.
const (
	ScopeRegion  = "region"
	ScopeCluster = "cluster"
)

// Network checks a network on its own: an IPv4 CIDR, a gateway inside it,
// the scope with its region or cluster, allocation ranges inside the CIDR
// and apart from each other, reserved addresses inside it. Overlaps with
// other networks are Overlaps' concern.
func Network(n *unyov1.Network) error {
	var fields validate.Fields
	fields.Name("name", n.GetName())
	s := n.GetSpec()
	if s == nil {
		fields.Add("spec", "required: a network needs at least spec.cidr and spec.scope")
		return fields.Err("network", n.GetName())
	}
	var whole ipam.Range
	prefix, err := ipam.ParsePrefix(s.GetCidr())
	switch {
	case s.GetCidr() == "":
		fields.Add("spec.cidr", "required (an IPv4 network such as 10.0.0.0/24)")
	case err != nil:
		fields.Add("spec.cidr", err.Error())
	default:
		whole = ipam.PrefixRange(prefix)
	}
	inside := func(field string, r ipam.Range) {
		if err == nil && s.GetCidr() != "" && !(whole.Contains(r.First) && whole.Contains(r.Last)) {
			fields.Addf(field, "%s is outside the network %s", r, s.GetCidr())
		}
	}
	if g := s.GetGateway(); g != "" {
		if a, err := ipam.ParseAddr(g); err != nil {
			fields.Add("spec.gateway", err.Error())
		} else {
			inside("spec.gateway", ipam.Range{First: a, Last: a})
		}
	}
	switch s.GetScope() {
	case ScopeRegion:
		if s.GetRegion() == "" {
			fields.Add("spec.region", "required with scope region: the region the network spans")
		}
		if s.GetCluster() != "" {
			fields.Add("spec.cluster", "must be empty with scope region (set scope: cluster for a cluster's network)")
		}
	case ScopeCluster:
		if s.GetCluster() == "" {
			fields.Add("spec.cluster", "required with scope cluster: the cluster the network belongs to")
		}
	default:
		oneOf(&fields, "spec.scope", s.GetScope(), true, ScopeRegion, ScopeCluster)
	}
	if r := s.GetRegion(); r != "" {
		fields.Name("spec.region", r)
	}
	if c := s.GetCluster(); c != "" {
		fields.Name("spec.cluster", c)
	}
	var ranges []ipam.Range
	for i, ar := range s.GetRanges() {
		field := fmt.Sprintf("spec.ranges[%d]", i)
		r, err := ipam.ParseRange(ar)
		if err != nil {
			fields.Add(field, err.Error())
			continue
		}
		inside(field, r)
		for j, o := range ranges {
			if o.Overlaps(r) {
				fields.Addf(field, "%s overlaps spec.ranges[%d] (%s)", r, j, o)
			}
		}
		ranges = append(ranges, r)
	}
	for i, a := range s.GetReserved() {
		field := fmt.Sprintf("spec.reserved[%d]", i)
		r, err := ipam.ParseReserved(a)
		if err != nil {
			fields.Add(field, err.Error())
			continue
		}
		inside(field, r)
	}
	if len(fields) == 0 {
		if p, err := ipam.NewPool(s); err != nil {
			fields.Add("spec", err.Error())
		} else if p.Size() == 0 {
			fields.Add("spec", "no address is left to allocate once the network, broadcast, gateway and reserved addresses are taken out")
		}
	}
	return fields.Err("network", n.GetName())
}

// Overlaps refuses networks of the same scope whose CIDRs overlap: two
// region networks of one region, or two cluster networks of one cluster.
// all is every network as it will be once the apply is stored (the stored
// ones with the applied ones replacing theirs); changed names the applied
// ones, the only ones whose overlaps are reported (each error names the
// other network). Invalid CIDRs are skipped: Network reports them.
func Overlaps(all []*unyov1.Network, changed map[string]bool) error {
	type net struct {
		n *unyov1.Network
		r ipam.Range
	}
	byDomain := map[string][]net{}
	for _, n := range all {
		p, err := ipam.ParsePrefix(n.GetSpec().GetCidr())
		if err != nil {
			continue
		}
		d := domain(n.GetSpec())
		byDomain[d] = append(byDomain[d], net{n, ipam.PrefixRange(p)})
	}
	var errs []string
	for _, nets := range byDomain {
		for i, a := range nets {
			for j, b := range nets {
				if i == j || !changed[a.n.GetName()] || !a.r.Overlaps(b.r) {
					continue
				}
				if changed[b.n.GetName()] && j < i {
					continue // reported once, from the first of the two
				}
				errs = append(errs, fmt.Sprintf("network %q: spec.cidr %s overlaps network %q (%s) in the same %s",
					a.n.GetName(), a.n.GetSpec().GetCidr(), b.n.GetName(), b.n.GetSpec().GetCidr(), where(a.n.GetSpec())))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	slices.Sort(errs)
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}

// domain is where a network's addresses must be unique.
func domain(s *unyov1.NetworkSpec) string {
	if s.GetScope() == ScopeCluster {
		return "cluster/" + s.GetCluster()
	}
	return s.GetScope() + "/" + s.GetRegion()
}

func where(s *unyov1.NetworkSpec) string {
	if s.GetScope() == ScopeCluster {
		return fmt.Sprintf("cluster %q", s.GetCluster())
	}
	return fmt.Sprintf("region %q", s.GetRegion())
}

// ParseQuantity reads a quantity of bytes as flavors write them: a whole
// number with an optional suffix, Ki, Mi, Gi, Ti (powers of 1024) or k,
// M, G, T (powers of 1000); "512Mi", "4Gi", "20G".
func ParseQuantity(s string) (int64, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	mult, ok := quantityUnits[s[i:]]
	if i == 0 || !ok {
		return 0, fmt.Errorf("%q is not a quantity (expected a whole number with a unit such as 512Mi or 4Gi)", s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if n == 0 {
		return 0, fmt.Errorf("%q is zero", s)
	}
	return n * mult, nil
}

var quantityUnits = map[string]int64{
	"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
	"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
}

// oneOf records field as invalid unless v is one of allowed (or empty,
// when not required); it reports whether v is allowed.
func oneOf(f *validate.Fields, field, v string, required bool, allowed ...string) bool {
	switch {
	case v == "" && required:
		f.Addf(field, "required: one of %s", strings.Join(allowed, ", "))
		return false
	case v == "":
		return true
	case !slices.Contains(allowed, v):
		f.Addf(field, "%q is not one of %s", v, strings.Join(allowed, ", "))
		return false
	}
	return true
}

func listFormats(fs []string) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f
		if f == "" {
			out[i] = "none, for an image reference"
		}
	}
	return strings.Join(out, ", ")
}
