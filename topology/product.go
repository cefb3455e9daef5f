package topology

import (
	"strconv"
	"strings"
)

// FormFactor is how a GPU is built into its server. It is a plain value,
// safe for concurrent use.
type FormFactor string

// Form factors a product name can state.
const (
	// FormUnknown: the name does not say.
	FormUnknown FormFactor = ""
	// FormSXM: an SXM module (SXM2, SXM4, SXM5) on an NVLink baseboard.
	FormSXM FormFactor = "sxm"
	// FormPCIe: a PCIe card.
	FormPCIe FormFactor = "pcie"
	// FormNVL: a PCIe card pair with an NVLink bridge (H100 NVL, H200 NVL).
	FormNVL FormFactor = "nvl"
)

// Product is what a GPU product name tells about the GPU. It is a plain
// value, safe for concurrent reads.
type Product struct {
	// Type is the well-known type the name holds (a100 for
	// "NVIDIA-A100-SXM4-80GB"), or a custom type made of the name
	// ("geforce-rtx-4090") when it holds none.
	Type GPUType
	// MemoryMiB is the memory the name states ("80GB"), else the nominal
	// memory of its variant (94 GiB for an H100 NVL), else that of its type;
	// 0 for a custom type that states none.
	MemoryMiB int
	// Form is the form factor the name states.
	Form FormFactor
	// MIGProfile is the MIG profile GPU feature discovery appends to the
	// product of a MIG device ("1g.5gb" in "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
	// empty for a whole GPU.
	MIGProfile string
	// Shared reports GPU feature discovery's "-SHARED" suffix (time-sliced
	// replicas of one GPU).
	Shared bool
}

// productLabel is the label key of GPU feature discovery.
const productLabel = "nvidia.com/gpu.product="

// maxProductLen bounds the length of a product name.
const maxProductLen = 256

// productModels maps a model token to a well-known type. Tokens are whole
// words of the name, so "A10" does not match "A100" nor "L4" "L40S".
// V100S (a faster-clocked PCIe V100) counts as a V100; A10G, A30, A40,
// H800, GH200 and the like are not in the list and become custom types.
var productModels = map[string]GPUType{
	"K80": K80, "P100": P100, "V100": V100, "V100S": V100, "T4": T4, "A10": A10, "A100": A100,
	"L4": L4, "L40S": L40S, "H100": H100, "H200": H200, "B200": B200,
}

// variantMemoryGiB holds the nominal memory of variants whose memory
// differs from their type's and that names often leave out (NVIDIA data
// sheets): H100 PCIe 80 GB, H100 NVL 94 GB, H200 NVL 141 GB.
var variantMemoryGiB = map[GPUType]map[FormFactor]int{
	H100: {FormPCIe: 80, FormNVL: 94},
	H200: {FormNVL: 141},
}

// ParseProduct reads a GPU product name as NVML reports it ("NVIDIA
// A100-SXM4-40GB", "Tesla V100-SXM2-16GB", "NVIDIA H100 80GB HBM3") or as
// GPU feature discovery labels a node ("NVIDIA-A100-SXM4-80GB", with or
// without the "nvidia.com/gpu.product=" key, and with GFD's "-MIG-<profile>"
// and "-SHARED" suffixes): the well-known type it names, its memory, its
// form factor. It is the one mapping used by NVML discovery and offered to
// embedders (Kubernetes node labels). A name that holds no well-known model
// becomes a custom type: lower case, spaces as '-', without the "nvidia-"
// and "tesla-" prefixes, at most 64 bytes. An empty name, or one longer than
// 256 bytes, is an error of kind [ErrInvalidGPUType].
func ParseProduct(name string) (Product, error) {
	name = strings.TrimSpace(name)
	if len(name) > maxProductLen {
		return Product{}, specErr(ErrInvalidGPUType, "", "product name of %d bytes is longer than %d", len(name), maxProductLen)
	}
	if k := strings.Index(strings.ToLower(name), productLabel); k == 0 {
		name = strings.TrimSpace(name[len(productLabel):])
	}
	if name == "" {
		return Product{}, specErr(ErrInvalidGPUType, "", "empty product name")
	}
	var p Product
	words := strings.FieldsFunc(name, func(r rune) bool { return r == ' ' || r == '-' || r == '_' })
	// GFD's suffixes: -SHARED last, -MIG-<profile> before it.
	if n := len(words); n > 0 && strings.EqualFold(words[n-1], "SHARED") {
		p.Shared = true
		words = words[:n-1]
	}
	for i, w := range words {
		if strings.EqualFold(w, "MIG") && i+1 < len(words) {
			p.MIGProfile = strings.ToLower(strings.Join(words[i+1:], "-"))
			words = words[:i]
			break
		}
	}
	custom := true
	for _, w := range words {
		u := strings.ToUpper(w)
		if t, ok := productModels[u]; ok && custom {
			p.Type, custom = t, false
			continue
		}
		switch {
		case strings.HasPrefix(u, "SXM"):
			p.Form = FormSXM
		case u == "PCIE":
			p.Form = FormPCIe
		case u == "NVL":
			p.Form = FormNVL
		case strings.HasSuffix(u, "GB"):
			if gb, err := strconv.Atoi(u[:len(u)-2]); err == nil && gb > 0 && gb <= 1<<16 && p.MemoryMiB == 0 {
				p.MemoryMiB = gb << 10
			}
		}
	}
	if custom {
		p.Type = customType(strings.Join(words, " "))
	}
	if p.MemoryMiB == 0 {
		if gb := variantMemoryGiB[p.Type][p.Form]; gb > 0 {
			p.MemoryMiB = gb << 10
		} else {
			p.MemoryMiB = p.Type.nominalMemoryMiB()
		}
	}
	return p, nil
}

// customType makes a type name of a product name that holds no known
// model.
func customType(name string) GPUType {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	t := strings.TrimPrefix(strings.TrimPrefix(b.String(), "nvidia-"), "tesla-")
	t = strings.Trim(t[:min(len(t), maxTypeLen)], "-")
	if t == "" {
		t = "unknown"
	}
	return GPUType(t)
}
