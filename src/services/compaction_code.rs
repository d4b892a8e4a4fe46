//! The application code a database's compactor runs: its merge operator
//! and compaction filter, built from the plugins its config names.
//!
//! A database written with merge operands that has no merge operator
//! configured gets [`MissingMergeOperator`], which fails the compaction
//! job just as SlateDB would without one, but says what to configure and
//! reaches `sleet status`, instead of a job that fails silently forever.

use std::sync::Arc;

use bytes::Bytes;
use slatedb::{CompactionFilterSupplier, MergeOperator, MergeOperatorError};

use crate::plugin::compaction::{CompactionCodeSpec, FailureReport};
use crate::plugin::{PluginError, PluginSet};

/// What a database's coordinator and workers hand SlateDB's builders.
#[derive(Clone)]
pub struct CompactionCode {
    pub merge_operator: Arc<dyn MergeOperator + Send + Sync>,
    pub compaction_filter: Option<Arc<dyn CompactionFilterSupplier>>,
}

impl std::fmt::Debug for CompactionCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionCode")
            .field("compaction_filter", &self.compaction_filter.is_some())
            .finish_non_exhaustive()
    }
}

impl CompactionCode {
    /// Builds the code `spec` names for `database` from the node's
    /// plugins; a plugin this node lacks, of the wrong kind, pinned to
    /// another sha256 or rejecting its config is an error naming it.
    pub fn build(
        spec: &CompactionCodeSpec,
        plugins: Option<&PluginSet>,
        node: &str,
        database: &str,
        report: FailureReport,
    ) -> Result<CompactionCode, PluginError> {
        let merge_operator: Arc<dyn MergeOperator + Send + Sync> = match &spec.merge_operator {
            Some(code) => {
                let plugin = PluginSet::required(plugins, &code.plugin, node)?
                    .merge_operator(&code.plugin, node)?;
                crate::plugin::check_pin(plugin.info(), code.limits.sha256.as_deref())?;
                Arc::new(plugin.operator(code, database, report.clone())?)
            }
            None => Arc::new(MissingMergeOperator {
                database: database.to_string(),
                report: report.clone(),
            }),
        };
        let compaction_filter = match &spec.compaction_filter {
            Some(code) => {
                let plugin = PluginSet::required(plugins, &code.plugin, node)?
                    .compaction_filter(&code.plugin, node)?;
                crate::plugin::check_pin(plugin.info(), code.limits.sha256.as_deref())?;
                let supplier: Arc<dyn CompactionFilterSupplier> =
                    Arc::new(plugin.supplier(code, database, report)?);
                Some(supplier)
            }
            None => None,
        };
        Ok(CompactionCode {
            merge_operator,
            compaction_filter,
        })
    }
}

/// What to do about merge operands without a merge operator.
pub const MISSING_MERGE_OPERATOR_FIX: &str = "set merge_operator = \"plugin:<name>\" in the \
     database's registry file, with a plugin that computes what the application's merge \
     operator does (docs/plugins.md#merge-operators)";

/// The merge operator of a database that configures none: the first
/// merge operand a compaction meets fails the job, as it would in
/// SlateDB, with a message that says what to configure.
struct MissingMergeOperator {
    database: String,
    report: FailureReport,
}

impl MissingMergeOperator {
    fn fail(&self) -> MergeOperatorError {
        let message = format!(
            "{} holds merge operands but no merge operator is configured; {MISSING_MERGE_OPERATOR_FIX}",
            self.database
        );
        (self.report)(message.clone());
        MergeOperatorError::Callback { message }
    }
}

impl MergeOperator for MissingMergeOperator {
    fn merge(
        &self,
        _key: &Bytes,
        _existing_value: Option<Bytes>,
        _value: Bytes,
    ) -> Result<Bytes, MergeOperatorError> {
        Err(self.fail())
    }

    fn merge_batch(
        &self,
        _key: &Bytes,
        _existing_value: Option<Bytes>,
        _operands: &[Bytes],
    ) -> Result<Bytes, MergeOperatorError> {
        Err(self.fail())
    }
}
