//! The label sets of sleet's metric families, one struct a set.

use prometheus_client::encoding::EncodeLabelSet;

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServiceLabels {
    pub service: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskStateLabels {
    pub service: String,
    pub state: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabels {
    pub database: String,
    pub target: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PassLabels {
    pub database: String,
    pub target: String,
    pub result: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CopiedLabels {
    pub database: String,
    pub target: String,
    pub copier: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PrunedLabels {
    pub database: String,
    pub target: String,
    pub kind: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub plugin: String,
    pub export: String,
    pub result: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DurationLabels {
    pub plugin: String,
    pub export: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub plugin: String,
    pub decision: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    pub store: String,
}

#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreTrustLabels {
    pub store: String,
    pub trust: String,
}
