//! `sleet store check`: prove an object store before a fleet trusts it.

use clap::Subcommand;

use super::{Format, emit};
use crate::Error;
use crate::store::check::{self as store_check, CheckOptions};

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Race conditional writes and check reads, lists, ETags, copies, multipart uploads and the
    /// clock under a scratch prefix of URL (deleted afterwards); exits 1 when a property the
    /// fleet needs fails
    Check {
        /// A URL in the store, e.g. s3://bucket/sleet; the check writes under
        /// URL/.sleet-store-check/
        url: String,
        /// Writers racing for one key in each round [default: 8, with --short 4]
        #[arg(long, value_parser = clap::value_parser!(u16).range(2..=64))]
        writers: Option<u16>,
        /// Rounds of each race [default: 5, with --short 3]
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=100))]
        rounds: Option<u16>,
        /// Only what a node checks before it writes to a store (smaller races, no copies,
        /// listing or multipart upload)
        #[arg(long)]
        short: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

pub async fn run(command: StoreCommand) -> Result<(), Error> {
    let StoreCommand::Check {
        url,
        writers,
        rounds,
        short,
        format,
    } = command;
    let canonical = crate::model::registry::canonicalize_url(&url)?;
    let (store, base) = crate::store::open_url(&canonical).map_err(|source| Error::Store {
        action: "open",
        location: canonical.clone(),
        source,
    })?;
    let mut options = CheckOptions::full();
    if short {
        options = CheckOptions::short(options.skew_bound);
    }
    if let Some(writers) = writers {
        options.writers = usize::from(writers);
    }
    if let Some(rounds) = rounds {
        options.rounds = usize::from(rounds);
    }
    let report = store_check::run(store, &canonical, &base, options).await;
    emit(format, &report, store_check::render_text);
    let failed = report.unsafe_properties().len() + report.unproven_properties().len();
    if failed > 0 {
        return Err(Error::UnsafeStore {
            store: report.store.clone(),
            failed,
        });
    }
    Ok(())
}
