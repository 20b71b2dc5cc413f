use super::*;

fn amt(s: &str) -> Amount {
    Amount::parse(&K8sQuantity(s.into())).unwrap()
}

fn cap(value: &str, policy: Option<RequestPolicy>) -> CapacityView {
    CapacityView {
        value: amt(value),
        policy,
    }
}

fn range(default: &str, min: &str, max: Option<&str>, step: Option<&str>) -> RequestPolicy {
    RequestPolicy {
        default: Some(amt(default)),
        range: Some(PolicyRange {
            min: amt(min),
            max: max.map(amt),
            step: step.map(amt),
        }),
        valid_values: Vec::new(),
    }
}

fn values(default: &str, v: &[&str]) -> RequestPolicy {
    RequestPolicy {
        default: Some(amt(default)),
        range: None,
        valid_values: v.iter().map(|s| amt(s)).collect(),
    }
}

#[test]
fn without_policy_a_request_is_taken_as_is_and_no_request_takes_everything() {
    let c = cap("40Gi", None);
    assert_eq!(consumed(Some(&amt("10Gi")), &c), amt("10Gi"));
    assert_eq!(consumed(None, &c), amt("40Gi"));
}

#[test]
fn no_request_takes_the_policy_default() {
    let c = cap("40Gi", Some(range("4Gi", "1Gi", None, None)));
    assert_eq!(consumed(None, &c).text, "4Gi");
}

#[test]
fn a_range_raises_small_requests_to_the_minimum_and_rounds_up_to_the_step() {
    let c = cap("100", Some(range("10", "10", Some("50"), Some("5"))));
    assert_eq!(consumed(Some(&amt("3")), &c).nanos, amt("10").nanos);
    assert_eq!(consumed(Some(&amt("12")), &c).text, "15");
    assert_eq!(consumed(Some(&amt("20")), &c).text, "20");
    // 51 rounds to 55, above the maximum: refused.
    let over = consumed(Some(&amt("51")), &c);
    assert_eq!(over.nanos, amt("55").nanos);
    assert!(violates(&over, c.policy.as_ref()));
    assert!(!violates(&amt("15"), c.policy.as_ref()));
}

#[test]
fn step_rounding_writes_binary_quantities_canonically() {
    let c = cap("8Gi", Some(range("1Gi", "1Gi", None, Some("1Gi"))));
    assert_eq!(consumed(Some(&amt("1500Mi")), &c).text, "2Gi");
}

#[test]
fn valid_values_pick_the_first_one_at_least_the_request() {
    let c = cap("10", Some(values("2", &["2", "4", "8"])));
    assert_eq!(consumed(Some(&amt("3")), &c).text, "4");
    assert_eq!(consumed(Some(&amt("8")), &c).text, "8");
    let too_big = consumed(Some(&amt("9")), &c);
    assert!(violates(&too_big, c.policy.as_ref()), "above every value");
}

#[test]
fn a_share_needs_every_named_capacity_and_room_left() {
    let mut device = BTreeMap::new();
    device.insert("memory".to_string(), cap("40Gi", None));
    device.insert(
        "cores".to_string(),
        cap("8", Some(range("1", "1", Some("8"), Some("1")))),
    );
    let mut req = BTreeMap::new();
    req.insert("memory".to_string(), amt("10Gi"));
    let share = share_of(Some(&req), &device).unwrap();
    assert_eq!(share["memory"].text, "10Gi");
    assert_eq!(share["cores"].text, "1", "not asked for: the default");
    assert!(fits(&share, &device, |_| 0));
    assert!(fits(&share, &device, |n| if n == "memory" {
        amt("30Gi").nanos
    } else {
        0
    }));
    assert!(!fits(&share, &device, |n| if n == "memory" {
        amt("31Gi").nanos
    } else {
        0
    }));
    req.insert("bandwidth".to_string(), amt("1"));
    assert_eq!(share_of(Some(&req), &device), None, "unknown capacity");
    let whole = share_of(None, &device).unwrap();
    assert_eq!(whole["memory"].text, "40Gi");
}

#[test]
fn computed_amounts_print_like_quantities() {
    assert_eq!(Amount::computed(15_000_000_000 * 1_000_000_000).text, "15G");
    assert_eq!(
        Amount::computed(3 * 1024 * 1024 * 1_000_000_000).text,
        "3Mi"
    );
    assert_eq!(Amount::computed(1500 * 1_000_000_000).text, "1500");
    assert_eq!(Amount::computed(500_000_000).text, "500m");
    assert_eq!(Amount::computed(1_500).text, "1500n");
}
