//! Durations written the way people write them: `10s`, `1m`, `1h 30m`, `30d`.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A [`Duration`] that reads and writes as a humantime string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    pub const fn from_secs(secs: u64) -> Self {
        HumanDuration(Duration::from_secs(secs))
    }

    pub const fn from_millis(millis: u64) -> Self {
        HumanDuration(Duration::from_millis(millis))
    }

    pub const fn is_zero(&self) -> bool {
        self.0.is_zero()
    }

    /// The same duration truncated to whole seconds, for ages in output.
    pub fn whole_seconds(self) -> Self {
        HumanDuration(Duration::from_secs(self.0.as_secs()))
    }
}

impl From<Duration> for HumanDuration {
    fn from(d: Duration) -> Self {
        HumanDuration(d)
    }
}

impl From<HumanDuration> for Duration {
    fn from(d: HumanDuration) -> Self {
        d.0
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl FromStr for HumanDuration {
    type Err = humantime::DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s).map(HumanDuration)
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration \"{text}\": {e} (write it like 10s, 5m or 1h 30m)"
            ))
        })
    }
}

impl JsonSchema for HumanDuration {
    fn schema_name() -> Cow<'static, str> {
        "HumanDuration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A duration such as `10s`, `5m`, `1h 30m` or `30d`.",
            "type": "string",
            "pattern": "^([0-9]+ *[a-zµ]+ *)+$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_like_humantime() {
        let d: HumanDuration = "1h 30m".parse().unwrap();
        assert_eq!(d.0, Duration::from_secs(5400));
        assert_eq!(HumanDuration::from_secs(60).to_string(), "1m");
        assert_eq!(
            serde_json::to_string(&HumanDuration::from_millis(2500)).unwrap(),
            "\"2s 500ms\""
        );
        assert_eq!(
            HumanDuration::from_millis(2500).whole_seconds().to_string(),
            "2s"
        );
    }

    #[test]
    fn bad_durations_name_the_text_and_the_fix() {
        let err = serde_json::from_str::<HumanDuration>("\"soon\"").unwrap_err();
        assert!(
            err.to_string().contains("invalid duration \"soon\""),
            "{err}"
        );
    }
}
