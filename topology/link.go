package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// LinkClass is how two GPUs of one server are connected, ordered from the
// farthest to the closest, so that a larger class is a better connection.
// The names in brackets are those of nvidia-smi topo -m.
// Its values are constants, safe for concurrent use.
type LinkClass uint8

const (
	// LinkUnknown is the zero value: nothing is known of the pair. It stands
	// only in servers without a link matrix.
	LinkUnknown LinkClass = iota
	// LinkCrossSocket [SYS]: the path crosses the inter-socket link (QPI, UPI
	// or Infinity Fabric) between NUMA nodes.
	LinkCrossSocket
	// LinkSameNUMA [NODE]: the path crosses host bridges within one NUMA node.
	LinkSameNUMA
	// LinkHostBridge [PHB]: the path crosses one PCIe host bridge (the CPU's
	// root complex).
	LinkHostBridge
	// LinkMultiSwitch [PXB]: the path crosses several PCIe switches but no
	// host bridge.
	LinkMultiSwitch
	// LinkSingleSwitch [PIX]: the path crosses one PCIe switch.
	LinkSingleSwitch
	// LinkSameBoard [SB]: both GPUs sit on one board, such as the two GPUs of a
	// Tesla K80.
	LinkSameBoard
	// LinkNVLink [NV#]: direct NVLink links; [Link.NVLinks] gives how many.
	LinkNVLink
	// LinkNVSwitch [NVS#]: both GPUs hang off NVSwitches, one full-bandwidth
	// domain; [Link.NVLinks] gives each GPU's links into the switches when
	// known.
	LinkNVSwitch
	// LinkSelf [X]: a GPU with itself, on the diagonal of the matrix.
	LinkSelf
	numLinkClasses
)

var linkClassNames = [...]string{
	LinkUnknown:      "?",
	LinkCrossSocket:  "SYS",
	LinkSameNUMA:     "NODE",
	LinkHostBridge:   "PHB",
	LinkMultiSwitch:  "PXB",
	LinkSingleSwitch: "PIX",
	LinkSameBoard:    "SB",
	LinkNVLink:       "NV",
	LinkNVSwitch:     "NVS",
	LinkSelf:         "X",
}

// Valid reports whether c is one of the classes defined above.
func (c LinkClass) Valid() bool { return c < numLinkClasses }

// String returns the class's nvidia-smi style name ("SYS", "PIX", "NV", ...).
func (c LinkClass) String() string {
	if !c.Valid() {
		return fmt.Sprintf("LinkClass(%d)", uint8(c))
	}
	return linkClassNames[c]
}

// Link is the connection between two GPUs of a server.
// It is a plain value, safe for concurrent use.
type Link struct {
	// Class is the kind of connection.
	Class LinkClass
	// NVLinks counts the NVLink links between the two GPUs (class
	// LinkNVLink) or from each GPU into the switches (LinkNVSwitch, where 0
	// means unknown). It is 0 for other classes.
	NVLinks int
}

// String returns the nvidia-smi style name: "X", "SYS", "NODE", "PHB",
// "PXB", "PIX", "SB", "NV4", "NVS" or "NVS12".
func (l Link) String() string {
	switch {
	case l.Class == LinkNVLink, l.Class == LinkNVSwitch && l.NVLinks > 0:
		return l.Class.String() + strconv.Itoa(l.NVLinks)
	}
	return l.Class.String()
}

// MarshalText writes [Link.String], so links read well in JSON.
func (l Link) MarshalText() ([]byte, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	return []byte(l.String()), nil
}

// UnmarshalText reads what [ParseLink] reads.
func (l *Link) UnmarshalText(b []byte) error {
	v, err := ParseLink(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// maxNVLinks bounds the NVLink count of one link; no GPU has more than 18.
const maxNVLinks = 64

// ParseLink reads a link in the notation of nvidia-smi topo -m, in any case:
// "X", "SYS" (or the older "SOC"), "NODE", "PHB", "PXB", "PIX", "SB", "NV1"
// to "NV64", "NVS" and "NVS1" to "NVS64". Anything else is an error of kind
// [ErrUnknownLinkClass].
func ParseLink(s string) (Link, error) {
	l, err := parseLink(s)
	if err != nil {
		return Link{}, err
	}
	return l, nil
}

func parseLink(s string) (Link, *SpecError) {
	u := strings.ToUpper(strings.TrimSpace(s))
	switch u {
	case "X":
		return Link{Class: LinkSelf}, nil
	case "SYS", "SOC":
		return Link{Class: LinkCrossSocket}, nil
	case "NODE":
		return Link{Class: LinkSameNUMA}, nil
	case "PHB":
		return Link{Class: LinkHostBridge}, nil
	case "PXB":
		return Link{Class: LinkMultiSwitch}, nil
	case "PIX":
		return Link{Class: LinkSingleSwitch}, nil
	case "SB":
		return Link{Class: LinkSameBoard}, nil
	case "NVS":
		return Link{Class: LinkNVSwitch}, nil
	}
	class, digits := LinkNVLink, ""
	switch {
	case strings.HasPrefix(u, "NVS"):
		class, digits = LinkNVSwitch, u[3:]
	case strings.HasPrefix(u, "NV"):
		digits = u[2:]
	default:
		return Link{}, specErr(ErrUnknownLinkClass, "", "%q is not a link class (want X, SYS, NODE, PHB, PXB, PIX, SB, NV<n> or NVS[<n>])", s)
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || n > maxNVLinks || digits[0] == '+' || digits[0] == '0' {
		return Link{}, specErr(ErrUnknownLinkClass, "", "%q: the NVLink count must be an integer from 1 to %d", s, maxNVLinks)
	}
	return Link{Class: class, NVLinks: n}, nil
}

// validate checks a link that stands off the diagonal.
func (l Link) validate() *SpecError {
	switch {
	case !l.Class.Valid():
		return specErr(ErrUnknownLinkClass, "", "link class value %d is not defined", uint8(l.Class))
	case l.Class == LinkNVLink && (l.NVLinks < 1 || l.NVLinks > maxNVLinks):
		return specErr(ErrInvalidCount, "", "NVLink link with %d links (want 1 to %d)", l.NVLinks, maxNVLinks)
	case l.Class == LinkNVSwitch && (l.NVLinks < 0 || l.NVLinks > maxNVLinks):
		return specErr(ErrInvalidCount, "", "NVSwitch link with %d links (want 0 to %d)", l.NVLinks, maxNVLinks)
	case l.Class != LinkNVLink && l.Class != LinkNVSwitch && l.NVLinks != 0:
		return specErr(ErrInvalidCount, "", "%s link with NVLinks=%d (only NV and NVS links count NVLinks)", l.Class, l.NVLinks)
	}
	return nil
}

// NominalBandwidth returns the nominal bandwidth of link l between two GPUs
// of types a and b, in GB/s per direction: NVLink counts times the per-link
// rate; NVSwitch the GPU's full NVLink bandwidth; same board and PCIe
// switches the PCIe x16 rate; host bridge and same NUMA node the PCIe rate
// too (traffic is staged through the root complex); crossing sockets, or an
// unknown link, half the PCIe rate. For a pair of different types the slower
// side counts. Custom types are taken as PCIe 3 GPUs with 25 GB/s NVLinks.
// These are data-sheet figures, not measurements: where measured bandwidths
// are known, set [Server.Bandwidth].
func (l Link) NominalBandwidth(a, b GPUType) float64 {
	return min(l.nominal(a), l.nominal(b))
}

func (l Link) nominal(t GPUType) float64 {
	info, ok := t.Info()
	if !ok {
		info = GPUInfo{NVLinks: 6, NVLinkGBps: 25, PCIeGBps: pcie3}
	}
	switch l.Class {
	case LinkSelf:
		return 0
	case LinkNVLink:
		return float64(l.NVLinks) * info.NVLinkGBps
	case LinkNVSwitch:
		n := l.NVLinks
		if n == 0 {
			n = info.NVLinks
		}
		return float64(n) * info.NVLinkGBps
	case LinkSameBoard, LinkSingleSwitch, LinkMultiSwitch, LinkHostBridge, LinkSameNUMA:
		return info.PCIeGBps
	}
	return info.PCIeGBps / 2
}
