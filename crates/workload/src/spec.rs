//! The CoreWorkload's properties, read and checked once: YCSB's names, YCSB's defaults, and
//! errors that name the property and the fix.

use crate::keys::{significant_bytes, KeyNamer};
use iodig_model::props::{Properties, PropertyError};

/// Properties of YCSB's core workload, client and measurement that iodig understands.
pub const CORE_PROPERTIES: &[&str] = &[
    "workload",
    "db",
    "recordcount",
    "operationcount",
    "insertstart",
    "insertcount",
    "threadcount",
    "target",
    "maxexecutiontime",
    "table",
    "fieldcount",
    "fieldlength",
    "minfieldlength",
    "fieldlengthdistribution",
    "fieldnameprefix",
    "readallfields",
    "readallfieldsbyname",
    "writeallfields",
    "dataintegrity",
    "versionedwrites",
    "readproportion",
    "updateproportion",
    "insertproportion",
    "scanproportion",
    "readmodifywriteproportion",
    "requestdistribution",
    "minscanlength",
    "maxscanlength",
    "scanlengthdistribution",
    "insertorder",
    "zeropadding",
    "hotspotdatafraction",
    "hotspotopnfraction",
    "exponential.percentile",
    "exponential.frac",
    "core_workload_insertion_retry_limit",
    "core_workload_insertion_retry_interval",
    "measurementtype",
    "measurement.interval",
    "hdrhistogram.percentiles",
    "status.interval",
    "metrics.linger",
    "reportlatencyforeacherror",
    "latencytrackederrors",
    "seed",
];

/// Request distributions of the key chooser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestDistribution {
    /// `uniform`: every loaded key equally likely (the default).
    Uniform,
    /// `zipfian`: YCSB's scrambled zipfian, a few popular keys scattered over the key space; the
    /// range allows for the inserts expected in the run.
    Zipfian,
    /// `latest`: skewed toward the most recently acknowledged inserts (workload D).
    Latest,
    /// `hotspot`: `hotspotopnfraction` of operations on the lowest `hotspotdatafraction` of key
    /// numbers.
    Hotspot,
    /// `exponential`: exponentially decaying back from the newest acknowledged key
    /// (`exponential.percentile`, `exponential.frac`).
    Exponential,
    /// `sequential`: key numbers in order from `insertstart`, wrapping around after `insertcount`,
    /// one sequence for all workers.
    Sequential,
}

/// Field length distributions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthDistribution {
    /// `constant`: always the maximum (`fieldlength`, or `maxscanlength`).
    Constant,
    /// `uniform`: uniform between the minimum and the maximum, both included.
    Uniform,
    /// `zipfian`: between the minimum and the maximum, favouring the short.
    Zipfian,
}

/// The checked configuration of a CoreWorkload.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    /// `table`: the table (or column family) written and read; `usertable` by default.
    pub table: String,
    /// `recordcount`: records in the loaded dataset; run-phase inserts number from here.
    pub record_count: u64,
    /// `operationcount`: measured operations per run step, all threads together; 0: until the
    /// time limit.
    pub operation_count: u64,
    /// `insertstart`: the first key number this client loads (to split a load across clients).
    pub insert_start: u64,
    /// `insertcount`: how many keys this client loads, and the range the key chooser draws from;
    /// `recordcount − insertstart` unless given.
    pub insert_count: u64,
    /// `fieldcount`: fields per record, at least 1.
    pub field_count: u64,
    /// `fieldlength`: bytes per value, or the longest value when the length distribution is not
    /// constant.
    pub field_length: u64,
    /// `minfieldlength`: the shortest value in bytes, for uniform and zipfian lengths only.
    pub min_field_length: u64,
    /// `fieldlengthdistribution`: how value lengths are drawn.
    pub field_length_distribution: LengthDistribution,
    /// `fieldnameprefix`: field names are this followed by the field's index (`field0`…).
    pub field_name_prefix: String,
    /// `readallfields`: reads and scans ask for every field; else for one random field.
    pub read_all_fields: bool,
    /// `readallfieldsbyname`: with `readallfields`, name every field instead of asking for all.
    pub read_all_fields_by_name: bool,
    /// `writeallfields`: updates write every field; else one random field.
    pub write_all_fields: bool,
    /// `dataintegrity`: values are deterministic (`key:field:hash…`) and every read is checked,
    /// recorded as `VERIFY`.
    pub data_integrity: bool,
    /// `versionedwrites`: every written value carries its write's version, kept in a ledger
    /// so reads and `iodig verify` can tell lost, stale and corrupt values (iodig's own).
    pub versioned_writes: bool,
    /// READ, UPDATE, INSERT, SCAN, READMODIFYWRITE, in YCSB's order.
    pub proportions: [f64; 5],
    /// `requestdistribution`: how the key of a read, update, scan or read-modify-write is chosen.
    pub request_distribution: RequestDistribution,
    /// `minscanlength`: the fewest records a scan asks for (at least 1).
    pub min_scan_length: u64,
    /// `maxscanlength`: the most records a scan asks for.
    pub max_scan_length: u64,
    /// `scanlengthdistribution`: how scan lengths are drawn (`uniform` by default).
    pub scan_length_distribution: LengthDistribution,
    /// `insertorder=ordered`: keys are the key numbers themselves; `hashed` (false, the default)
    /// scatters them with FNV-1a.
    pub ordered_inserts: bool,
    /// `zeropadding`: the least number of digits in a key name (capped at 64).
    pub zero_padding: usize,
    /// `hotspotdatafraction`: share of the key numbers (the lowest) that is hot, 0 to 1.
    pub hotspot_data_fraction: f64,
    /// `hotspotopnfraction`: share of operations on the hot keys, 0 to 1.
    pub hotspot_opn_fraction: f64,
    /// `exponential.percentile`: percentage of draws that fall within `exponential_frac` of the
    /// records.
    pub exponential_percentile: f64,
    /// `exponential.frac`: fraction of `recordcount`, counted back from the newest key, that holds
    /// `exponential_percentile`% of the draws.
    pub exponential_frac: f64,
    /// `core_workload_insertion_retry_limit`: retries of a failed load-phase insert (0: none).
    pub insertion_retry_limit: u64,
    /// `core_workload_insertion_retry_interval`: seconds between retries, each scaled by a random
    /// 0.8–1.2.
    pub insertion_retry_interval_secs: f64,
    /// Warnings to show and store with the run (e.g. proportions normalised as YCSB does).
    pub notes: Vec<String>,
}

fn err(msg: String) -> PropertyError {
    PropertyError(msg)
}

impl WorkloadSpec {
    /// Reads and checks the workload properties with YCSB's defaults; the error names the property
    /// at fault and how to fix it.
    pub fn from_properties(p: &Properties) -> Result<Self, PropertyError> {
        // YCSB treats a missing recordcount as 0 and 0 as Integer.MAX_VALUE (YCSB#384); an
        // explicit error is kinder than a workload that never finishes.
        let record_count = p.get_u64("recordcount", 0)?;
        let insert_start = p.get_u64("insertstart", 0)?;
        let insert_count = match p.get("insertcount") {
            Some(_) => p.get_u64("insertcount", 0)?,
            None => record_count.checked_sub(insert_start).ok_or_else(|| {
                err(format!(
                    "property insertstart={insert_start} is beyond recordcount={record_count}; insertstart must be below recordcount"
                ))
            })?,
        };
        let field_count = p.get_u64("fieldcount", 10)?;
        if field_count == 0 {
            return Err(err(
                "property fieldcount=0: a record needs at least one field; set fieldcount ≥ 1"
                    .into(),
            ));
        }
        let field_length = p.get_u64("fieldlength", 100)?;
        let min_field_length = p.get_u64("minfieldlength", 1)?;
        let field_length_distribution =
            length_distribution(p, "fieldlengthdistribution", "constant")?;
        if field_length_distribution != LengthDistribution::Constant
            && min_field_length > field_length
        {
            return Err(err(format!(
                "property minfieldlength={min_field_length} exceeds fieldlength={field_length}; lower minfieldlength"
            )));
        }
        let min_scan_length = p.get_u64("minscanlength", 1)?;
        let max_scan_length = p.get_u64("maxscanlength", 1000)?;
        if min_scan_length > max_scan_length || max_scan_length == 0 {
            return Err(err(format!(
                "properties minscanlength={min_scan_length} and maxscanlength={max_scan_length}: need 1 ≤ minscanlength ≤ maxscanlength"
            )));
        }
        let data_integrity = p.get_bool("dataintegrity", false)?;
        if data_integrity && field_length_distribution != LengthDistribution::Constant {
            return Err(err(
                "property dataintegrity=true needs fieldlengthdistribution=constant (values are rebuilt to be checked)".into(),
            ));
        }
        let versioned_writes = p.get_bool(crate::integrity::PROPERTY, false)?;
        if versioned_writes {
            check_versioned_writes(
                data_integrity,
                field_count,
                match field_length_distribution {
                    LengthDistribution::Constant => field_length,
                    _ => min_field_length,
                },
            )
            .map_err(err)?;
        }
        let insertorder = p.get_choice("insertorder", "hashed", &["hashed", "ordered"])?;
        let zero_padding = p.get_u64("zeropadding", 1)?;
        let (proportions, notes) = proportions(p)?;
        let spec = Self {
            table: p.get_str("table", "usertable").to_string(),
            record_count,
            operation_count: p.get_u64("operationcount", 0)?,
            insert_start,
            insert_count,
            field_count,
            field_length,
            min_field_length,
            field_length_distribution,
            field_name_prefix: p.get_str("fieldnameprefix", "field").to_string(),
            read_all_fields: p.get_bool("readallfields", true)?,
            read_all_fields_by_name: p.get_bool("readallfieldsbyname", false)?,
            write_all_fields: p.get_bool("writeallfields", false)?,
            data_integrity,
            versioned_writes,
            proportions,
            request_distribution: request_distribution(p)?,
            min_scan_length,
            max_scan_length,
            scan_length_distribution: length_distribution(p, "scanlengthdistribution", "uniform")?,
            ordered_inserts: insertorder == "ordered",
            zero_padding: zero_padding.min(64) as usize,
            hotspot_data_fraction: fraction(p, "hotspotdatafraction", 0.2)?,
            hotspot_opn_fraction: fraction(p, "hotspotopnfraction", 0.8)?,
            exponential_percentile: p.get_f64("exponential.percentile", 95.0)?,
            exponential_frac: p.get_f64("exponential.frac", 0.857_142_857_1)?,
            insertion_retry_limit: p.get_u64("core_workload_insertion_retry_limit", 0)?,
            insertion_retry_interval_secs: p
                .get_f64("core_workload_insertion_retry_interval", 3.0)?,
            notes,
        };
        spec.check_key_space()?;
        Ok(spec)
    }

    /// The run phase needs keys to choose from, except when it only inserts.
    fn check_key_space(&self) -> Result<(), PropertyError> {
        let chooses_keys =
            self.proportions[0] + self.proportions[1] + self.proportions[3] + self.proportions[4]
                > 0.0;
        // recordcount=0 with an explicit insertcount leaves the acknowledged key counter at
        // "no key yet": `latest` would then build ζ over 2^64 terms, the others pick keys
        // far beyond the data.
        if chooses_keys && (self.insert_count == 0 || self.record_count == 0) {
            return Err(err(
                "property recordcount is 0 (or insertcount=0): reads, updates and scans need records; set -p recordcount=N as used for the load"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Field names `field0…`, in index order.
    pub fn field_names(&self) -> Vec<String> {
        (0..self.field_count)
            .map(|i| format!("{}{i}", self.field_name_prefix))
            .collect()
    }

    /// Whether the run phase inserts records (D, E, any `insertproportion`), growing the dataset.
    pub fn run_inserts(&self) -> bool {
        self.proportions[2] > 0.0
    }

    /// Expected number of inserts in the run phase, used to size the zipfian key range.
    pub fn expected_new_keys(&self) -> u64 {
        (self.operation_count as f64 * self.proportions[2] * 2.0) as u64
    }

    /// How this workload names its keys (`insertorder`, `zeropadding`), sized for the key
    /// numbers it expects.
    pub fn key_namer(&self) -> KeyNamer {
        let largest = self
            .record_count
            .max(self.insert_start.saturating_add(self.insert_count))
            .saturating_add(self.expected_new_keys());
        KeyNamer {
            ordered: self.ordered_inserts,
            zero_padding: self.zero_padding,
            keynum_bytes: significant_bytes(largest),
        }
    }
}

fn fraction(p: &Properties, key: &str, default: f64) -> Result<f64, PropertyError> {
    let v = p.get_f64(key, default)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(err(format!(
            "property {key}={v}: expected a fraction between 0 and 1"
        )))
    }
}

/// Versioned writes decide the values themselves and need room for the version in each.
fn check_versioned_writes(
    data_integrity: bool,
    field_count: u64,
    shortest_field: u64,
) -> Result<(), String> {
    use crate::integrity::{ALL_FIELDS, HEADER_LEN};
    if data_integrity {
        return Err("properties dataintegrity=true and versionedwrites=true both decide the values written; choose one (versionedwrites also checks every read, and iodig verify checks every key afterwards)".into());
    }
    if shortest_field < HEADER_LEN as u64 {
        return Err(format!(
            "property versionedwrites=true needs every value at least {HEADER_LEN} bytes long (the version takes {HEADER_LEN}); the shortest field here is {shortest_field}: raise fieldlength (or minfieldlength)"
        ));
    }
    if field_count >= u64::from(ALL_FIELDS) {
        return Err(format!(
            "property versionedwrites=true supports up to {} fields; fieldcount={field_count} is more",
            ALL_FIELDS - 1
        ));
    }
    Ok(())
}

fn length_distribution(
    p: &Properties,
    key: &str,
    default: &str,
) -> Result<LengthDistribution, PropertyError> {
    Ok(
        match p.get_choice(key, default, &["constant", "uniform", "zipfian"])? {
            "constant" => LengthDistribution::Constant,
            "uniform" => LengthDistribution::Uniform,
            _ => LengthDistribution::Zipfian,
        },
    )
}

/// The values `requestdistribution` accepts.
pub const REQUEST_DISTRIBUTIONS: [&str; 6] = [
    "uniform",
    "zipfian",
    "latest",
    "hotspot",
    "exponential",
    "sequential",
];

fn request_distribution(p: &Properties) -> Result<RequestDistribution, PropertyError> {
    Ok(
        match p.get_choice("requestdistribution", "uniform", &REQUEST_DISTRIBUTIONS)? {
            "uniform" => RequestDistribution::Uniform,
            "zipfian" => RequestDistribution::Zipfian,
            "latest" => RequestDistribution::Latest,
            "hotspot" => RequestDistribution::Hotspot,
            "exponential" => RequestDistribution::Exponential,
            _ => RequestDistribution::Sequential,
        },
    )
}

const PROPORTION_KEYS: [&str; 5] = [
    "readproportion",
    "updateproportion",
    "insertproportion",
    "scanproportion",
    "readmodifywriteproportion",
];

/// The op mix. YCSB normalises weights that do not sum to 1; iodig does the same and says so.
fn proportions(p: &Properties) -> Result<([f64; 5], Vec<String>), PropertyError> {
    let defaults = [0.95, 0.05, 0.0, 0.0, 0.0];
    let mut out = [0.0; 5];
    for (i, key) in PROPORTION_KEYS.iter().enumerate() {
        out[i] = p.get_f64(key, defaults[i])?;
        if out[i] < 0.0 {
            return Err(err(format!(
                "property {key}={}: a proportion cannot be negative",
                out[i]
            )));
        }
    }
    let sum: f64 = out.iter().sum();
    if sum <= 0.0 {
        return Err(err(format!(
            "properties {}: all proportions are 0, so there is no operation to run; set at least one above 0",
            PROPORTION_KEYS.join(", ")
        )));
    }
    let mut notes = Vec::new();
    if (sum - 1.0).abs() > 1e-9 {
        let given: Vec<String> = PROPORTION_KEYS
            .iter()
            .zip(out)
            .filter(|(_, v)| *v > 0.0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let scaled: Vec<String> = PROPORTION_KEYS
            .iter()
            .zip(out)
            .filter(|(_, v)| *v > 0.0)
            .map(|(k, v)| format!("{k}={:.4}", v / sum))
            .collect();
        notes.push(format!(
            "proportions sum to {sum} instead of 1 ({}); normalised as YCSB does to {}",
            given.join(", "),
            scaled.join(", ")
        ));
    }
    Ok((out, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[&str]) -> Properties {
        let mut p = Properties::new();
        for kv in pairs {
            p.apply_override(kv).unwrap();
        }
        p
    }

    #[test]
    fn reads_need_records_even_with_an_explicit_insertcount() {
        let e = WorkloadSpec::from_properties(&props(&[
            "recordcount=0",
            "insertcount=100",
            "requestdistribution=latest",
        ]))
        .unwrap_err();
        assert!(e.0.contains("recordcount is 0"), "{}", e.0);
        // Inserts only need no records to start from.
        let inserts_only = props(&[
            "recordcount=0",
            "insertcount=100",
            "readproportion=0",
            "updateproportion=0",
            "insertproportion=1",
        ]);
        assert!(WorkloadSpec::from_properties(&inserts_only).is_ok());
    }

    #[test]
    fn defaults_are_ycsb_core_defaults() {
        let s = WorkloadSpec::from_properties(&props(&["recordcount=1000"])).unwrap();
        assert_eq!(s.proportions, [0.95, 0.05, 0.0, 0.0, 0.0]);
        assert_eq!(s.request_distribution, RequestDistribution::Uniform);
        assert_eq!(
            (s.field_count, s.field_length, s.max_scan_length),
            (10, 100, 1000)
        );
        assert_eq!(s.insert_count, 1000);
        assert!(s.notes.is_empty());
    }

    #[test]
    fn proportions_not_summing_to_one_are_normalised_with_a_note() {
        let s = WorkloadSpec::from_properties(&props(&[
            "recordcount=10",
            "readproportion=1",
            "updateproportion=1",
        ]))
        .unwrap();
        assert_eq!(s.notes.len(), 1);
        assert!(
            s.notes[0].contains("normalised as YCSB does"),
            "{}",
            s.notes[0]
        );
        assert!(s.notes[0].contains("readproportion=0.5000"));
    }

    #[test]
    fn all_zero_proportions_are_an_error_naming_them() {
        let e = WorkloadSpec::from_properties(&props(&[
            "recordcount=10",
            "readproportion=0",
            "updateproportion=0",
        ]))
        .unwrap_err();
        assert!(e.0.contains("readproportion"), "{}", e.0);
    }

    #[test]
    fn ten_billion_records_are_accepted() {
        let s = WorkloadSpec::from_properties(&props(&[
            "recordcount=10000000000",
            "operationcount=10000000000",
        ]))
        .unwrap();
        assert_eq!(s.record_count, 10_000_000_000);
        assert_eq!(s.insert_count, 10_000_000_000);
    }

    #[test]
    fn bad_values_name_the_property() {
        let e = WorkloadSpec::from_properties(&props(&["recordcount=ten"])).unwrap_err();
        assert!(e.0.contains("recordcount=ten"), "{}", e.0);
        let e =
            WorkloadSpec::from_properties(&props(&["recordcount=10", "requestdistribution=zipf"]))
                .unwrap_err();
        assert!(
            e.0.contains("requestdistribution=zipf") && e.0.contains("zipfian"),
            "{}",
            e.0
        );
    }
}
