//! "Did you mean ...?" for misspelled field and plugin names.

/// The candidate closest to `name`, if it is close enough to be a likely typo.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        let d = if c.to_ascii_lowercase() == lower {
            0
        } else {
            strsim::osa_distance(&lower, &c.to_ascii_lowercase())
        };
        let limit = if name.len() >= 10 { 3 } else { 2 };
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// `"a", "b", "c"` for messages that list valid choices.
pub fn quoted_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items
        .into_iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_transpositions_and_case() {
        let fields = [
            "schedulerName",
            "plugins",
            "pluginConfig",
            "percentageOfNodesToScore",
        ];
        assert_eq!(closest("schedulerNmae", fields), Some("schedulerName"));
        assert_eq!(closest("SchedulerName", fields), Some("schedulerName"));
        assert_eq!(closest("plugin", fields), Some("plugins"));
        assert_eq!(closest("weight", fields), None);
    }
}
