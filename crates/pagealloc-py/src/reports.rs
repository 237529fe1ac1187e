//! The /proc reports as `(kernel text, plain Python data)`: the package
//! (python/pagealloc/reports.py) turns the data into dataclasses whose
//! `str()` is the text.

use pagealloc::{MigrateType, PageAllocator, MIGRATE_TYPES};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

pub(crate) fn report<'py>(py: Python<'py>, a: &PageAllocator, name: &str) -> PyResult<(String, Bound<'py, PyAny>)> {
    match name {
        "buddyinfo" => {
            let r = py.detach(|| a.stats().buddyinfo());
            let zones = r.zones.iter().map(|z| (z.nid, z.zone, z.free.to_vec())).collect::<Vec<_>>();
            Ok((r.to_string(), zones.into_pyobject(py)?.into_any()))
        }
        "pagetypeinfo" => {
            let r = py.detach(|| a.stats().pagetypeinfo());
            let mut zones = Vec::new();
            for z in &r.zones {
                let free = PyDict::new(py);
                let blocks = PyDict::new(py);
                for i in 0..MIGRATE_TYPES {
                    let t = MigrateType::from_index(i).name();
                    free.set_item(t, z.free[i].to_vec())?;
                    blocks.set_item(t, z.blocks[i])?;
                }
                zones.push((z.nid, z.zone, free, blocks));
            }
            Ok((r.to_string(), zones.into_pyobject(py)?.into_any()))
        }
        "zoneinfo" => {
            let r = py.detach(|| a.stats().zoneinfo());
            let mut zones = Vec::new();
            for z in &r.zones {
                let d = PyDict::new(py);
                d.set_item("nid", z.nid)?;
                d.set_item("zone", z.zone)?;
                for (k, v) in [
                    ("free", z.free),
                    ("min", z.min),
                    ("low", z.low),
                    ("high", z.high),
                    ("spanned", z.spanned),
                    ("present", z.present),
                    ("managed", z.managed),
                    ("start_pfn", z.start_pfn),
                ] {
                    d.set_item(k, v)?;
                }
                d.set_item("stats", z.stats.iter().copied().collect::<std::collections::BTreeMap<_, _>>())?;
                zones.push(d);
            }
            Ok((r.to_string(), zones.into_pyobject(py)?.into_any()))
        }
        "vmstat" => {
            let r = py.detach(|| a.stats().vmstat());
            let d = PyDict::new(py);
            for (k, v) in &r.items {
                d.set_item(*k, *v)?;
            }
            Ok((r.to_string(), d.into_any()))
        }
        _ => Err(PyValueError::new_err(format!(
            "unknown report {name:?}: expected 'buddyinfo', 'pagetypeinfo', 'zoneinfo' or 'vmstat'"
        ))),
    }
}
