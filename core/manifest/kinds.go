package manifest

import (
	"google.golang.org/protobuf/reflect/protoreflect"
)

// documentFields are the fields of a kind's message that a document may
// set, in the order Encode writes them. Other fields (revision, timestamps)
// are filled in by servers. A kind without one of them (a Region has no
// cluster) simply doesn't accept it. Everything else about a kind is read
// from its registration (package kinds) and its message descriptor.
//
// usage (a Network's addresses) is filled in by servers on reads and
// written so that `get -o yaml` shows it; a document carrying it back
// applies, and the kind's Prepare drops it before anything is stored.
// status (a RegionService's or a Compute's) and the fields root resolves
// for a Compute (service, index, resources, image_source, price, address)
// and a Loadbalancer (network, vip, backends) are likewise shown on reads;
// root keeps its own status over a document's, and never takes a Compute
// or a Loadbalancer from a document.
var documentFields = []protoreflect.Name{"name", "cluster", "labels", "spec", "usage", "service", "index", "resources", "image_source", "price", "address",
	"network", "vip", "backends", "status"}
