//! The mutator: from a seed to an input, by a few stacked edits chosen with a seeded PRNG.
//!
//! Text edits apply to every target: byte flips and interesting bytes, token and line
//! splices between the target's seeds, duplicated lines, deep nesting, huge numbers,
//! negative numbers and quantities, long strings, deletions. YAML targets also get anchors
//! and aliases (one value reused, and nested "billion laughs" chains); CEL gets
//! expression-level splices (seeds joined by operators, wrapped in macros); AdmissionReview
//! JSON gets structural edits on the parsed document (so most inputs still parse and reach
//! the webhook's decisions, not only serde's errors).
//!
//! Every edit keeps the input under the size limit it is given.

use fastrand::Rng;
use serde_json::Value;

use crate::Target;

/// Bytes worth putting anywhere in YAML, JSON or CEL.
const INTERESTING_BYTES: &[u8] = b"\0\t\n\r \"#&'*,-.:;<>?[\\]{|}!%@`~0189eE\x7f\xc3\xff";

/// Numbers that sit on or past a limit somewhere: i32/i64/u64 bounds, float overflow,
/// quantities with huge suffixes or too many digits.
const HUGE_NUMBERS: &[&str] = &[
    "2147483647",
    "2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1e308",
    "1e309",
    "-1e309",
    "4.9e-324",
    "1e-400",
    "0.000000000000000000000000001",
    "999999999999999999999999999999999999999999999999",
    "8Ei",
    "9Ei",
    "16Ei",
    "999999999999Ei",
    "1e18",
    "1E19",
    "123456789012345678901234567890m",
    "0x7fffffffffffffff",
    "0o777",
    ".inf",
    "-.inf",
    ".nan",
    "NaN",
];

/// Negative values, in each form a number or quantity is written.
const NEGATIVE: &[&str] = &[
    "-1", "-0", "-0.5", "-1m", "-1Gi", "-100m", "-8Ei", "'-1'", "\"-2Gi\"", "-1e3",
];

/// YAML and JSON fragments worth splicing in: tags, block scalars, merges, flow
/// collections, documents, null spellings.
const YAML_TOKENS: &[&str] = &[
    "null",
    "~",
    "[]",
    "{}",
    "''",
    "\"\"",
    "true",
    "false",
    "yes",
    "no",
    "!!str",
    "!!int",
    "!!float",
    "!!binary aGVsbG8=",
    "!!map",
    "!!seq",
    "!<tag:yaml.org,2002:str>",
    "!custom",
    "|",
    ">-",
    "|+",
    "<<: {}",
    "<<: *a0",
    "? key",
    "---",
    "...",
    "%YAML 1.2\n---",
    "\"\\u0000\\uFFFF\\U0010FFFF\"",
    "\"\\x\"",
    "'it''s'",
    "\t",
    "\u{feff}",
    "{a: [b, {c: d}]}",
    "[1, [2, [3]]]",
];

/// CEL fragments: the DRA environment's functions, macros, literals of each type.
const CEL_TOKENS: &[&str] = &[
    "device",
    "device.driver",
    "device.attributes",
    "device.capacity",
    "device.attributes[\"gpu.example.com\"]",
    "device.capacity[\"gpu.example.com\"].memory",
    "quantity(\"1Gi\")",
    "quantity(\"-1\")",
    "quantity(\"9Ei\")",
    "semver(\"1.2.3-rc.1+build\")",
    "isQuantity",
    "isSemver",
    "compareTo",
    "isLessThan",
    "isGreaterThan",
    "add",
    "sub",
    "sign",
    "asInteger",
    "asApproximateFloat",
    "isInteger",
    "major",
    "minor",
    "patch",
    "matches",
    "startsWith",
    "endsWith",
    "contains",
    "size",
    "has",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "dyn",
    "type",
    "null",
    "1u",
    "-1",
    "1.5e300",
    "b\"\\xff\"",
    "r\"\\d+\"",
    "'''x'''",
    "\"\\u263a\"",
    "[]",
    "{}",
    "{1: 2, \"a\": [1]}",
    "&&",
    "||",
    "!",
    "?",
    ":",
    "==",
    "!=",
    "<=",
    "in",
    "+",
    "*",
    "/",
    "%",
    ".",
    "(",
    ")",
    "[",
    "]",
];

/// Pod and review fields the webhook reads, with values of the right and the wrong shape.
const JSON_FIELDS: &[(&str, &str)] = &[
    ("schedulerName", "\"other\""),
    ("priorityClassName", "\"cluster-default\""),
    ("priority", "-2147483648"),
    ("preemptionPolicy", "\"PreemptLowerPriority\""),
    (
        "nodeSelector",
        "{\"disk\": \"ssd\", \"beta.kubernetes.io/arch\": \"amd64\"}",
    ),
    (
        "tolerations",
        "[{\"key\": \"k\", \"operator\": \"Exists\"}, {\"operator\": \"Exists\"}, {\"key\": \"mykey\", \"operator\": \"Equal\", \"value\": \"value\", \"effect\": \"NoSchedule\", \"tolerationSeconds\": -9223372036854775808}]",
    ),
    (
        "affinity",
        "{\"nodeAffinity\": {\"requiredDuringSchedulingIgnoredDuringExecution\": {\"nodeSelectorTerms\": [{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"NotIn\", \"values\": []}], \"matchFields\": [{\"key\": \"metadata.name\", \"operator\": \"In\", \"values\": [\"n1\"]}]}]}, \"preferredDuringSchedulingIgnoredDuringExecution\": [{\"weight\": 100, \"preference\": {}}]}, \"podAntiAffinity\": {}}",
    ),
    ("serviceAccountName", "\"gold\""),
    ("serviceAccount", "\"tolerant\""),
    ("operation", "\"UPDATE\""),
    ("operation", "\"CONNECT\""),
    ("operation", "\"DELETE\""),
    ("uid", "\"\""),
    ("namespace", "\"kube-system\""),
    ("oldObject", "null"),
    ("object", "null"),
    ("subResource", "\"status\""),
    ("apiVersion", "\"admission.k8s.io/v1beta1\""),
    ("kind", "\"Pod\""),
    ("patch", "\"W10=\""),
    ("dryRun", "true"),
    (
        "options",
        "{\"apiVersion\": \"meta.k8s.io/v1\", \"kind\": \"CreateOptions\"}",
    ),
];

/// One input for `target` from `seeds`, at most `max_len` bytes.
pub fn input(rng: &mut Rng, target: Target, seeds: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut data = seeds[rng.usize(..seeds.len())].clone();
    // One input in sixteen is a seed as it is: the examples must keep loading.
    if rng.u8(..16) == 0 {
        data.truncate(max_len);
        return data;
    }
    let edits = 1 + rng.usize(..4);
    for _ in 0..edits {
        mutate(rng, target, seeds, &mut data, max_len);
        data.truncate(max_len);
    }
    data
}

fn mutate(rng: &mut Rng, target: Target, seeds: &[Vec<u8>], data: &mut Vec<u8>, max_len: usize) {
    let yaml = matches!(target, Target::Config | Target::Dump);
    match rng.u8(..16) {
        0 => flip_bit(rng, data),
        1 => interesting_byte(rng, data),
        2 => {
            let other = &seeds[rng.usize(..seeds.len())];
            splice_tokens(rng, data, other)
        }
        3 => {
            let other = &seeds[rng.usize(..seeds.len())];
            splice_lines(rng, data, other, max_len)
        }
        4 => duplicate_lines(rng, data, max_len),
        5 => deep_nesting(rng, target, data, max_len),
        6 => {
            let n = HUGE_NUMBERS[rng.usize(..HUGE_NUMBERS.len())];
            replace_number(rng, data, n)
        }
        7 => {
            let n = NEGATIVE[rng.usize(..NEGATIVE.len())];
            replace_number(rng, data, n)
        }
        8 => long_string(rng, data, max_len),
        9 => delete_range(rng, data),
        10 | 11 if yaml => yaml_aliases(rng, data, max_len),
        10 | 11 if target == Target::Cel => cel_combine(rng, data, seeds, max_len),
        10 | 11 => json_structural(rng, data, max_len),
        _ => {
            let dict: &[&str] = match target {
                Target::Cel => CEL_TOKENS,
                Target::Admission if rng.bool() => {
                    return json_structural(rng, data, max_len);
                }
                _ => YAML_TOKENS,
            };
            let token = dict[rng.usize(..dict.len())];
            insert_token(rng, data, token);
        }
    }
}

fn pos(rng: &mut Rng, data: &[u8]) -> usize {
    rng.usize(..=data.len())
}

fn flip_bit(rng: &mut Rng, data: &mut [u8]) {
    if !data.is_empty() {
        let i = rng.usize(..data.len());
        data[i] ^= 1 << rng.u8(..8);
    }
}

fn interesting_byte(rng: &mut Rng, data: &mut Vec<u8>) {
    let b = INTERESTING_BYTES[rng.usize(..INTERESTING_BYTES.len())];
    if data.is_empty() || rng.bool() {
        let p = pos(rng, data);
        data.insert(p, b);
    } else {
        let i = rng.usize(..data.len());
        data[i] = b;
    }
}

fn delete_range(rng: &mut Rng, data: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    let a = rng.usize(..data.len());
    let len = 1 + rng.usize(..(data.len() - a).min(64));
    data.drain(a..a + len);
}

/// Where tokens start and end: runs of letters, digits and `._-/` form a token; each other
/// byte is one.
fn tokens(data: &[u8]) -> Vec<(usize, usize)> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b"._-/".contains(&b);
    let mut out = Vec::new();
    let mut i = 0;
    while i < data.len() {
        let start = i;
        if word(data[i]) {
            while i < data.len() && word(data[i]) {
                i += 1;
            }
        } else {
            i += 1;
        }
        if !data[start].is_ascii_whitespace() {
            out.push((start, i));
        }
    }
    out
}

/// Replaces one token of `data` with one of `other`, or inserts it before one.
fn splice_tokens(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8]) {
    let theirs = tokens(other);
    let ours = tokens(data);
    if theirs.is_empty() || ours.is_empty() {
        return;
    }
    let (a, b) = theirs[rng.usize(..theirs.len())];
    let (c, d) = ours[rng.usize(..ours.len())];
    let piece = other[a..b].to_vec();
    if rng.bool() {
        data.splice(c..d, piece);
    } else {
        data.splice(c..c, piece);
    }
}

fn insert_token(rng: &mut Rng, data: &mut Vec<u8>, token: &str) {
    let ours = tokens(data);
    if ours.is_empty() || rng.u8(..4) == 0 {
        let p = pos(rng, data);
        data.splice(p..p, token.bytes());
    } else {
        let (c, d) = ours[rng.usize(..ours.len())];
        if rng.bool() {
            data.splice(c..d, token.bytes());
        } else {
            data.splice(d..d, token.bytes());
        }
    }
}

/// Line start offsets (and the end).
fn line_starts(data: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(
        data.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1),
    );
    if *v.last().unwrap_or(&0) != data.len() {
        v.push(data.len());
    }
    v
}

/// A few lines of `other` put between two lines of `data`.
fn splice_lines(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8], max_len: usize) {
    let theirs = line_starts(other);
    let ours = line_starts(data);
    if theirs.len() < 2 {
        return;
    }
    let a = rng.usize(..theirs.len() - 1);
    let b = (a + 1 + rng.usize(..8)).min(theirs.len() - 1);
    let mut piece = other[theirs[a]..theirs[b]].to_vec();
    if !piece.ends_with(b"\n") {
        piece.push(b'\n');
    }
    if data.len() + piece.len() > max_len {
        return;
    }
    let at = ours[rng.usize(..ours.len())];
    if rng.u8(..4) == 0 && at < data.len() {
        // Replace the line there instead.
        let end = data[at..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(data.len(), |e| at + e + 1);
        data.splice(at..end, piece);
    } else {
        data.splice(at..at, piece);
    }
}

/// A run of lines repeated: duplicate keys, documents, list items, many objects.
fn duplicate_lines(rng: &mut Rng, data: &mut Vec<u8>, max_len: usize) {
    let ls = line_starts(data);
    if ls.len() < 2 {
        return;
    }
    let a = rng.usize(..ls.len() - 1);
    let b = (a + 1 + rng.usize(..12)).min(ls.len() - 1);
    let mut piece = data[ls[a]..ls[b]].to_vec();
    if !piece.ends_with(b"\n") {
        piece.push(b'\n');
    }
    let times = [1, 2, 10, 100, 1000, 10_000][rng.usize(..6)];
    let room = max_len.saturating_sub(data.len()) / piece.len().max(1);
    let times = times.min(room);
    let mut all = Vec::with_capacity(piece.len() * times);
    for _ in 0..times {
        all.extend_from_slice(&piece);
    }
    data.splice(ls[b]..ls[b], all);
}

/// Deep nesting where the language allows it: flow collections, block lists and maps for
/// YAML; brackets, negations and member chains for CEL; arrays and objects for JSON.
fn deep_nesting(rng: &mut Rng, target: Target, data: &mut Vec<u8>, max_len: usize) {
    let depth = [8, 64, 128, 129, 256, 1000, 10_000, 100_000][rng.usize(..8)];
    let (open, close): (&str, &str) = match target {
        Target::Config | Target::Dump => match rng.u8(..4) {
            0 => ("[", "]"),
            1 => ("{a: ", "}"),
            2 => ("- ", ""),
            _ => ("[{x: ", "}]"),
        },
        Target::Cel => match rng.u8(..5) {
            0 => ("(", ")"),
            1 => ("!", ""),
            2 => ("[", "]"),
            3 => ("-", ""),
            _ => ("size(", ")"),
        },
        Target::Admission => match rng.u8(..2) {
            0 => ("[", "]"),
            _ => ("{\"a\":", "}"),
        },
    };
    let per = open.len() + close.len();
    let depth = depth.min(max_len.saturating_sub(data.len()) / per.max(1));
    let mut piece = Vec::with_capacity(depth * per + 4);
    for _ in 0..depth {
        piece.extend_from_slice(open.as_bytes());
    }
    piece.extend_from_slice(match target {
        Target::Cel => b"true".as_slice(),
        Target::Admission => b"1",
        _ => b"x",
    });
    for _ in 0..depth {
        piece.extend_from_slice(close.as_bytes());
    }
    // Prefer a value's place: after `: ` in YAML/JSON, else anywhere.
    let at = find_value_place(rng, data).unwrap_or_else(|| pos(rng, data));
    data.splice(at..at, piece);
}

/// An offset just after a `: ` (a mapping value), if there is one.
fn find_value_place(rng: &mut Rng, data: &[u8]) -> Option<usize> {
    let places: Vec<usize> = data
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w == b": ")
        .map(|(i, _)| i + 2)
        .collect();
    if places.is_empty() {
        None
    } else {
        Some(places[rng.usize(..places.len())])
    }
}

/// Replaces a run of digits (with a unit suffix, if any) with `with`; inserts it if there
/// is no number.
fn replace_number(rng: &mut Rng, data: &mut Vec<u8>, with: &str) {
    let nums: Vec<(usize, usize)> = tokens(data)
        .into_iter()
        .filter(|(a, _)| data[*a].is_ascii_digit())
        .collect();
    if nums.is_empty() {
        let p = pos(rng, data);
        data.splice(p..p, with.bytes());
    } else {
        let (a, b) = nums[rng.usize(..nums.len())];
        data.splice(a..b, with.bytes());
    }
}

/// A long string in place of a token (a name, a key, a value).
fn long_string(rng: &mut Rng, data: &mut Vec<u8>, max_len: usize) {
    let len = [63, 64, 254, 256, 4096, 10 * 1024 + 1, 65_536, 300_000][rng.usize(..8)];
    let len = len.min(max_len.saturating_sub(data.len()));
    let unit: &[u8] = match rng.u8(..5) {
        0 => b"a",
        1 => "\u{e9}".as_bytes(),
        2 => b"a.",
        3 => b"\\",
        _ => b"9",
    };
    let mut piece = Vec::with_capacity(len);
    while piece.len() + unit.len() <= len {
        piece.extend_from_slice(unit);
    }
    let ours = tokens(data);
    if ours.is_empty() {
        let p = pos(rng, data);
        data.splice(p..p, piece);
    } else {
        let (a, b) = ours[rng.usize(..ours.len())];
        data.splice(a..b, piece);
    }
}

/// Anchors and aliases: one value given an anchor and reused elsewhere, or a chain of
/// lists each repeating the one before ("billion laughs") put where a value goes.
fn yaml_aliases(rng: &mut Rng, data: &mut Vec<u8>, max_len: usize) {
    if rng.bool() {
        // Anchor a value, alias it at another value's place.
        let places: Vec<usize> = data
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w == b": ")
            .map(|(i, _)| i + 2)
            .collect();
        if places.len() < 2 {
            return;
        }
        let name = format!("a{}", rng.u8(..4));
        let a = places[rng.usize(..places.len())];
        let b = places[rng.usize(..places.len())];
        let anchor = format!("&{name} ");
        let alias = format!("*{name} ");
        // Insert the later one first so the earlier offset stays valid.
        let (first, second) = if a <= b { (a, b) } else { (b, a) };
        let (first_text, second_text) = if rng.u8(..8) == 0 {
            (alias, anchor) // alias before its anchor: an error to report
        } else {
            (anchor, alias)
        };
        data.splice(second..second, second_text.into_bytes());
        if first != second {
            data.splice(first..first, first_text.into_bytes());
        }
        return;
    }
    let levels = 1 + rng.usize(..12);
    let width = [2, 9, 10, 50][rng.usize(..4)];
    let mut bomb = String::from("\nlaughs:\n");
    bomb.push_str("  l0: &l0 [\"lol\"]\n");
    for i in 1..=levels {
        let items = vec![format!("*l{}", i - 1); width].join(", ");
        bomb.push_str(&format!("  l{i}: &l{i} [{items}]\n"));
    }
    if data.len() + bomb.len() > max_len {
        return;
    }
    // At a line start: a new top-level key, or inside whatever block is there.
    let ls = line_starts(data);
    let at = ls[rng.usize(..ls.len())];
    data.splice(at..at, bomb.into_bytes());
}

/// CEL: two expressions joined by an operator, or one wrapped in a macro or a ternary.
fn cel_combine(rng: &mut Rng, data: &mut Vec<u8>, seeds: &[Vec<u8>], max_len: usize) {
    let other = &seeds[rng.usize(..seeds.len())];
    let mine = std::mem::take(data);
    let mut out = Vec::new();
    match rng.u8(..6) {
        0 => {
            out.extend_from_slice(b"(");
            out.extend_from_slice(&mine);
            out.extend_from_slice([") && (", ") || (", ") == ("][rng.usize(..3)].as_bytes());
            out.extend_from_slice(other);
            out.extend_from_slice(b")");
        }
        1 => {
            let list = format!(
                "[{}]",
                (1..=rng.usize(1..200))
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let mac = ["all", "exists", "exists_one", "filter", "map"][rng.usize(..5)];
            out.extend_from_slice(format!("{list}.{mac}(x, ").as_bytes());
            out.extend_from_slice(&mine);
            out.extend_from_slice(b")");
            if mac == "filter" || mac == "map" {
                out.extend_from_slice(b".size() >= 0");
            }
        }
        2 => {
            out.extend_from_slice(&mine);
            out.extend_from_slice(b" ? ");
            out.extend_from_slice(other);
            out.extend_from_slice(b" : false");
        }
        3 => {
            out.extend_from_slice(b"device.attributes[\"gpu.example.com\"].all(k, ");
            out.extend_from_slice(&mine);
            out.extend_from_slice(b")");
        }
        4 => {
            out.extend_from_slice(b"size(string(");
            out.extend_from_slice(&mine);
            out.extend_from_slice(b")) > 0");
        }
        _ => {
            out.extend_from_slice(b"!(");
            out.extend_from_slice(&mine);
            out.extend_from_slice(b")");
        }
    }
    if out.len() > max_len {
        *data = mine;
    } else {
        *data = out;
    }
}

/// An AdmissionReview edited as JSON: a field set, removed, retyped, blown up; the result
/// serialized again.
fn json_structural(rng: &mut Rng, data: &mut Vec<u8>, max_len: usize) {
    let Ok(mut v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let mut paths = Vec::new();
    collect_paths(&v, &mut Vec::new(), &mut paths);
    if paths.is_empty() {
        return;
    }
    let path = &paths[rng.usize(..paths.len())];
    let Some(node) = node_at(&mut v, path) else {
        return;
    };
    match rng.u8(..8) {
        0 => *node = random_scalar(rng),
        1 => {
            if let Value::Object(m) = node {
                let (k, val) = JSON_FIELDS[rng.usize(..JSON_FIELDS.len())];
                m.insert(
                    k.to_string(),
                    serde_json::from_str(val).unwrap_or(Value::Null),
                );
            } else {
                *node = Value::Null;
            }
        }
        2 => match node {
            Value::Object(m) if !m.is_empty() => {
                let k = m
                    .keys()
                    .nth(rng.usize(..m.len()))
                    .cloned()
                    .unwrap_or_default();
                m.remove(&k);
            }
            Value::Array(a) if !a.is_empty() => {
                a.remove(rng.usize(..a.len()));
            }
            _ => *node = Value::Array(vec![]),
        },
        3 => {
            // Many copies of an array element or of a whole subtree.
            let size = serde_json::to_vec(node).map_or(max_len, |b| b.len()).max(1);
            let n = [2, 100, 1000, 10_000][rng.usize(..4)].min(max_len / size + 1);
            let copy = node.clone();
            *node = Value::Array(vec![copy; n]);
        }
        4 => {
            let s = "x".repeat([64, 254, 4096, 65_536][rng.usize(..4)]);
            *node = Value::String(s);
        }
        5 => {
            // Swap an object for an array of its values and back: wrong types everywhere.
            *node = match std::mem::take(node) {
                Value::Object(m) => Value::Array(m.into_iter().map(|(_, v)| v).collect()),
                Value::Array(a) => Value::Object(
                    a.into_iter()
                        .enumerate()
                        .map(|(i, v)| (i.to_string(), v))
                        .collect(),
                ),
                other => Value::Array(vec![other]),
            };
        }
        6 => {
            let (k, val) = JSON_FIELDS[rng.usize(..JSON_FIELDS.len())];
            // Set a known field on a pod spec or the request, wherever it is.
            if let Some(obj) = node.as_object_mut() {
                obj.insert(
                    k.to_string(),
                    serde_json::from_str(val).unwrap_or(Value::Null),
                );
            }
        }
        _ => {
            let mut nested = Value::Null;
            for _ in 0..[10, 100, 126, 127, 128, 129, 1000][rng.usize(..7)] {
                nested = Value::Array(vec![nested]);
            }
            *node = nested;
        }
    }
    // serde_json refuses to read what it nests past 128; to_vec writes it anyway.
    if let Ok(out) = serde_json::to_vec(&v)
        && out.len() <= max_len
    {
        *data = out;
    }
}

#[derive(Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn collect_paths(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(at.clone());
    if out.len() > 4096 || at.len() > 64 {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                at.push(Step::Key(k.clone()));
                collect_paths(c, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate().take(64) {
                at.push(Step::Index(i));
                collect_paths(c, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn node_at<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    let mut cur = v;
    for s in path {
        cur = match s {
            Step::Key(k) => cur.get_mut(k.as_str())?,
            Step::Index(i) => cur.get_mut(*i)?,
        };
    }
    Some(cur)
}

fn random_scalar(rng: &mut Rng) -> Value {
    match rng.u8(..7) {
        0 => Value::Null,
        1 => Value::Bool(rng.bool()),
        2 => serde_json::from_str(HUGE_NUMBERS[rng.usize(..HUGE_NUMBERS.len())])
            .unwrap_or(Value::from(i64::MIN)),
        3 => Value::from(rng.i64(..)),
        4 => Value::String(String::new()),
        5 => Value::String(
            ["CREATE", "UPDATE", "", "v1", "Pod", "pods", "\u{0}"][rng.usize(..7)].into(),
        ),
        _ => Value::from(-1.5),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same seed gives the same inputs; every input stays under the limit.
    #[test]
    fn deterministic_and_bounded() {
        for t in Target::ALL {
            let seeds = crate::seeds::for_target(t);
            let make = |seed| {
                let mut rng = Rng::with_seed(seed);
                (0..200)
                    .map(|_| input(&mut rng, t, &seeds, 64 * 1024))
                    .collect::<Vec<_>>()
            };
            let a = make(7);
            assert_eq!(a, make(7));
            assert_ne!(a, make(8));
            assert!(a.iter().all(|i| i.len() <= 64 * 1024));
        }
    }
}
