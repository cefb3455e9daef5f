//go:build clp

package clp

/*
#include <stdlib.h>
#include "Clp_C_Interface.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/gpusched/gpusched/allocation/lp"
)

// solveMPSFile has CLP read an MPS file and solve it with the dual simplex
// in the given sense (CLP's reader ignores OBJSENSE), and returns the
// objective; the tests use it to check [lp.Model.WriteMPS] against CLP's own
// reader.
func solveMPSFile(path string, sense lp.Sense) (float64, error) {
	model := C.Clp_newModel()
	defer C.Clp_deleteModel(model)
	C.Clp_setLogLevel(model, 0)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	if rc := C.Clp_readMps(model, cpath, 1, 0); rc != 0 {
		return 0, fmt.Errorf("Clp_readMps returned %d", int(rc))
	}
	C.Clp_setOptimizationDirection(model, C.double(sense))
	C.Clp_dual(model, 0)
	if st := C.Clp_status(model); st != 0 {
		return 0, fmt.Errorf("CLP status %d", int(st))
	}
	return float64(C.Clp_objectiveValue(model)), nil
}
