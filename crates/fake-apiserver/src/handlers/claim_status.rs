//! What the API server checks in a ResourceClaim's status: `status.devices` (the per-device
//! status drivers write, DRAResourceClaimDeviceStatus): each entry names an allocated device,
//! once, with at most 8 conditions whose status is True, False or Unknown; and
//! `status.reservedFor`: at most 256 consumers, each with a resource, a name and a uid, no uid
//! twice. Any consumer resource is accepted: a pod (`"" pods`) or, with
//! DRAWorkloadResourceClaims, a PodGroup (`scheduling.k8s.io podgroups`).

use serde_json::Value;

/// Upstream `AllocatedDeviceStatusMaxConditions`.
const MAX_CONDITIONS: usize = 8;
/// Upstream `ResourceClaimReservedForMaxSize`.
const RESERVED_FOR_MAX_SIZE: usize = 256;

/// The field errors of `status.reservedFor` (empty: valid), worded as the API server words
/// them.
pub(super) fn reserved_for_errors(status: &Value) -> Vec<String> {
    let path = "status.reservedFor";
    let Some(consumers) = status["reservedFor"].as_array() else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    if consumers.len() > RESERVED_FOR_MAX_SIZE {
        errors.push(format!(
            "{path}: Too many: {}: must have at most {RESERVED_FOR_MAX_SIZE} items",
            consumers.len()
        ));
    }
    let mut uids: Vec<&str> = Vec::new();
    for (i, c) in consumers.iter().enumerate() {
        for field in ["resource", "name", "uid"] {
            if c[field].as_str().is_none_or(str::is_empty) {
                errors.push(format!("{path}[{i}].{field}: Required value"));
            }
        }
        if let Some(uid) = c["uid"].as_str().filter(|u| !u.is_empty()) {
            if uids.contains(&uid) {
                errors.push(format!("{path}[{i}].uid: Duplicate value: {uid:?}"));
            }
            uids.push(uid);
        }
    }
    errors
}

/// Whether a share ID has the form the API server takes: a lowercase UUID (8-4-4-4-12
/// hex digits).
fn is_share_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts.iter().all(|p| {
            p.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// The field errors of `status.allocation`'s results (consumable capacity): a `shareID`
/// must be a lowercase UUID, and each `consumedCapacity` amount a quantity, not negative,
/// and only with a `shareID` (the result of a device allowing multiple allocations).
pub(super) fn allocation_errors(status: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for (i, r) in status["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("status.allocation.devices.results[{i}]");
        let share = r["shareID"].as_str();
        if let Some(id) = share
            && !is_share_id(id)
        {
            errors.push(format!(
                "{path}.shareID: Invalid value: {id:?}: must be a lowercase UUID (8-4-4-4-12 hex digits)"
            ));
        }
        let Some(consumed) = r["consumedCapacity"].as_object() else {
            continue;
        };
        if share.is_none() {
            errors.push(format!(
                "{path}.consumedCapacity: Forbidden: only allowed with a shareID"
            ));
        }
        for (name, q) in consumed {
            if super::resource_slices::nanos(q).is_none_or(|n| n < 0) {
                errors.push(format!(
                    "{path}.consumedCapacity[{name}]: Invalid value: {q}: must be a quantity, not negative"
                ));
            }
        }
    }
    errors
}

/// The field errors of `status` (empty: valid), worded as the API server words them.
pub(super) fn device_status_errors(status: &Value) -> Vec<String> {
    let allocated: Vec<(&str, &str, &str)> = status["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["driver"].as_str().unwrap_or_default(),
                r["pool"].as_str().unwrap_or_default(),
                r["device"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let mut errors = Vec::new();
    let mut seen = Vec::new();
    for (i, d) in status["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("status.devices[{i}]");
        let id = (
            d["driver"].as_str().unwrap_or_default(),
            d["pool"].as_str().unwrap_or_default(),
            d["device"].as_str().unwrap_or_default(),
        );
        let shown = format!("{}/{}/{}", id.0, id.1, id.2);
        if !allocated.contains(&id) {
            errors.push(format!(
                "{path}: Invalid value: {shown:?}: must be an allocated device in the claim"
            ));
        }
        let key = (id, d["shareID"].as_str().unwrap_or_default());
        if seen.contains(&key) {
            errors.push(format!("{path}: Duplicate value: {shown:?}"));
        }
        seen.push(key);
        let conditions = d["conditions"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if conditions.len() > MAX_CONDITIONS {
            errors.push(format!(
                "{path}.conditions: Too many: {}: must have at most {MAX_CONDITIONS} items",
                conditions.len()
            ));
        }
        for (j, c) in conditions.iter().enumerate() {
            let cp = format!("{path}.conditions[{j}]");
            if c["type"].as_str().is_none_or(str::is_empty) {
                errors.push(format!("{cp}.type: Required value"));
            }
            match c["status"].as_str() {
                Some("True" | "False" | "Unknown") => {}
                Some(s) => errors.push(format!(
                    "{cp}.status: Unsupported value: {s:?}: supported values: \"False\", \"True\", \"Unknown\""
                )),
                None => errors.push(format!("{cp}.status: Required value")),
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn allocated() -> Value {
        json!({"devices": {"results": [
            {"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "d0"}
        ]}})
    }

    #[test]
    fn share_ids_and_consumed_capacity_are_checked() {
        let ok = json!({"allocation": {"devices": {"results": [
            {"request": "r", "driver": "d", "pool": "p", "device": "nic",
             "shareID": "0f8b2c4e-1a2b-4c3d-8e9f-00112233aabb",
             "consumedCapacity": {"bandwidth": "4G"}}
        ]}}});
        assert_eq!(allocation_errors(&ok), Vec::<String>::new());
        let bad = json!({"allocation": {"devices": {"results": [
            {"request": "r", "driver": "d", "pool": "p", "device": "nic",
             "shareID": "not-a-uuid", "consumedCapacity": {"bandwidth": "-1"}},
            {"request": "r", "driver": "d", "pool": "p", "device": "gpu",
             "consumedCapacity": {"memory": "1Gi"}}
        ]}}});
        assert_eq!(
            allocation_errors(&bad),
            [
                "status.allocation.devices.results[0].shareID: Invalid value: \"not-a-uuid\": must be a lowercase UUID (8-4-4-4-12 hex digits)",
                "status.allocation.devices.results[0].consumedCapacity[bandwidth]: Invalid value: \"-1\": must be a quantity, not negative",
                "status.allocation.devices.results[1].consumedCapacity: Forbidden: only allowed with a shareID",
            ]
        );
    }

    #[test]
    fn reserved_for_takes_pods_and_pod_groups_with_unique_uids() {
        let ok = json!({"reservedFor": [
            {"resource": "pods", "name": "p", "uid": "u1"},
            {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train", "uid": "pg1"}
        ]});
        assert_eq!(reserved_for_errors(&ok), Vec::<String>::new());
        let bad = json!({"reservedFor": [
            {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train", "uid": "pg1"},
            {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train", "uid": "pg1"},
            {"resource": "pods", "name": "p"}
        ]});
        assert_eq!(
            reserved_for_errors(&bad),
            vec![
                "status.reservedFor[1].uid: Duplicate value: \"pg1\"",
                "status.reservedFor[2].uid: Required value",
            ]
        );
        let many: Vec<Value> = (0..257)
            .map(|i| json!({"resource": "pods", "name": format!("p{i}"), "uid": format!("u{i}")}))
            .collect();
        assert_eq!(
            reserved_for_errors(&json!({"reservedFor": many})),
            vec!["status.reservedFor: Too many: 257: must have at most 256 items"]
        );
    }

    #[test]
    fn device_status_must_name_allocated_devices_with_valid_conditions() {
        let ok = json!({"allocation": allocated(), "devices": [{
            "driver": "gpu.example.com", "pool": "p", "device": "d0",
            "conditions": [{"type": "Attached", "status": "True"}]
        }]});
        assert_eq!(device_status_errors(&ok), Vec::<String>::new());
        let bad = json!({"allocation": allocated(), "devices": [
            {"driver": "gpu.example.com", "pool": "p", "device": "d9"},
            {"driver": "gpu.example.com", "pool": "p", "device": "d0",
             "conditions": [{"type": "Attached", "status": "Maybe"}, {"status": "True"}]},
            {"driver": "gpu.example.com", "pool": "p", "device": "d0"}
        ]});
        assert_eq!(
            device_status_errors(&bad),
            vec![
                "status.devices[0]: Invalid value: \"gpu.example.com/p/d9\": must be an allocated device in the claim",
                "status.devices[1].conditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "status.devices[1].conditions[1].type: Required value",
                "status.devices[2]: Duplicate value: \"gpu.example.com/p/d0\"",
            ]
        );
        // Without an allocation no device status is allowed.
        let orphan =
            json!({"devices": [{"driver": "gpu.example.com", "pool": "p", "device": "d0"}]});
        assert_eq!(device_status_errors(&orphan).len(), 1);
    }
}
