//! A JSON Schema validator for the subset `docs/results.schema.json` uses
//! (test only): `type`, `properties`, `required`, `additionalProperties`,
//! `items`, `enum`, `const`, `minimum`, `maximum`, `minItems`, `maxItems` and
//! local `$ref`s to `#/$defs/...`; annotations (`title`, `description`,
//! `$schema`, `$id`, `$comment`) are ignored. Any other keyword is an error, so
//! the schema cannot silently use one this validator does not check.

use serde_json::Value;

const ANNOTATIONS: [&str; 5] = ["title", "description", "$schema", "$id", "$comment"];

/// Validate `doc` against `schema`; every violation as `path: message`.
pub fn validate(schema: &Value, doc: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    check(schema, schema, doc, "$", &mut errs);
    errs
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => panic!("schema uses unknown type {other:?}"),
    }
}

fn check(root: &Value, s: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    let Some(obj) = s.as_object() else {
        if s == &Value::Bool(false) {
            errs.push(format!("{path}: not allowed"));
        }
        return;
    };
    for (k, kv) in obj {
        match k.as_str() {
            "$ref" => {
                let r = kv.as_str().expect("$ref is a string");
                let name = r.strip_prefix("#/$defs/").unwrap_or_else(|| panic!("unsupported $ref {r}"));
                let target = root.get("$defs").and_then(|d| d.get(name)).unwrap_or_else(|| panic!("no $defs/{name}"));
                check(root, target, v, path, errs);
            }
            "type" | "const" | "enum" | "minimum" | "maximum" | "minItems" | "maxItems" => {
                check_value(k, kv, v, path, errs)
            }
            "required" | "properties" | "additionalProperties" | "items" => {
                check_members(root, obj, (k, kv), v, path, errs)
            }
            "$defs" => {}
            a if ANNOTATIONS.contains(&a) => {}
            other => panic!("schema keyword {other:?} is not supported by this validator"),
        }
    }
}

/// The keywords on the value itself: its type, a constant or enumeration,
/// and numeric or length bounds.
fn check_value(k: &str, kv: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    match k {
        "type" => {
            let ok = match kv {
                Value::String(t) => type_ok(t, v),
                Value::Array(ts) => ts.iter().any(|t| type_ok(t.as_str().expect("type names"), v)),
                _ => panic!("bad type keyword"),
            };
            if !ok {
                errs.push(format!("{path}: expected type {kv}, found {v}"));
            }
        }
        "const" => {
            if kv != v {
                errs.push(format!("{path}: expected {kv}, found {v}"));
            }
        }
        "enum" => {
            if !kv.as_array().expect("enum is an array").contains(v) {
                errs.push(format!("{path}: {v} not one of {kv}"));
            }
        }
        "minimum" | "maximum" => {
            if let (Some(x), Some(lim)) = (v.as_f64(), kv.as_f64()) {
                if (k == "minimum" && x < lim) || (k == "maximum" && x > lim) {
                    errs.push(format!("{path}: {x} violates {k} {lim}"));
                }
            }
        }
        "minItems" | "maxItems" => {
            if let (Some(a), Some(lim)) = (v.as_array(), kv.as_u64()) {
                let n = a.len() as u64;
                if (k == "minItems" && n < lim) || (k == "maxItems" && n > lim) {
                    errs.push(format!("{path}: {n} items violates {k} {lim}"));
                }
            }
        }
        _ => unreachable!("not a value keyword: {k}"),
    }
}

/// The keywords on an object's or array's members; `obj` is the schema
/// object holding them (`additionalProperties` reads its `properties`).
fn check_members(
    root: &Value,
    obj: &serde_json::Map<String, Value>,
    (k, kv): (&str, &Value),
    v: &Value,
    path: &str,
    errs: &mut Vec<String>,
) {
    match k {
        "required" => {
            if let Some(o) = v.as_object() {
                for r in kv.as_array().expect("required is an array") {
                    let r = r.as_str().expect("required names");
                    if !o.contains_key(r) {
                        errs.push(format!("{path}: missing required {r:?}"));
                    }
                }
            }
        }
        "properties" => {
            if let Some(o) = v.as_object() {
                for (pk, ps) in kv.as_object().expect("properties is an object") {
                    if let Some(pv) = o.get(pk) {
                        check(root, ps, pv, &format!("{path}.{pk}"), errs);
                    }
                }
            }
        }
        "additionalProperties" => {
            if let Some(o) = v.as_object() {
                let known = obj.get("properties").and_then(Value::as_object);
                for (pk, pv) in o {
                    if known.is_some_and(|p| p.contains_key(pk)) {
                        continue;
                    }
                    match kv {
                        Value::Bool(false) => errs.push(format!("{path}: undocumented property {pk:?}")),
                        Value::Bool(true) => {}
                        s => check(root, s, pv, &format!("{path}.{pk}"), errs),
                    }
                }
            }
        }
        "items" => {
            if let Some(a) = v.as_array() {
                for (i, x) in a.iter().enumerate() {
                    check(root, kv, x, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => unreachable!("not a member keyword: {k}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validator_catches_what_it_claims() {
        let schema = json!({
            "type": "object", "required": ["a"], "additionalProperties": false,
            "properties": { "a": { "$ref": "#/$defs/n" }, "b": { "type": "array", "items": { "enum": [1, 2] }, "maxItems": 2 } },
            "$defs": { "n": { "type": ["integer", "null"], "minimum": 0 } }
        });
        assert!(validate(&schema, &json!({"a": 3, "b": [1, 2]})).is_empty());
        assert!(validate(&schema, &json!({"a": null})).is_empty());
        assert_eq!(validate(&schema, &json!({"b": [1]})).len(), 1);
        assert_eq!(validate(&schema, &json!({"a": -1})).len(), 1);
        assert_eq!(validate(&schema, &json!({"a": 1.5})).len(), 1);
        assert_eq!(validate(&schema, &json!({"a": 1, "c": 0})).len(), 1);
        assert_eq!(validate(&schema, &json!({"a": 1, "b": [1, 3, 2]})).len(), 2);
    }
}
