//! Nothing that arrives over the network may panic a conversion. Valid encodings with
//! random bytes overwritten reach the conversions in shapes no hand-written case covers;
//! whatever decodes must either be refused or convert to a value that is stable from then
//! on (core → proto → core gives it back).

mod common;

use common::*;
use drover_core::*;
use drover_proto::v1 as pb;
use proptest::prelude::*;
use prost::Message;
use std::fmt::Debug;

/// Corrupts `bytes` at the given (position, value) pairs, positions taken modulo the length.
fn corrupt(mut bytes: Vec<u8>, edits: &[(usize, u8)]) -> Vec<u8> {
    if !bytes.is_empty() {
        let len = bytes.len();
        for &(pos, value) in edits {
            bytes[pos % len] = value;
        }
    }
    bytes
}

/// Decodes and converts hostile bytes; when both succeed the value must be a fixed point of
/// the round trip.
fn check_stable<C, P>(bytes: &[u8]) -> Result<(), TestCaseError>
where
    P: Message + Default,
    for<'a> P: From<&'a C>,
    C: TryFrom<P> + PartialEq + Debug,
{
    let Ok(message) = P::decode(bytes) else {
        return Ok(());
    };
    let Ok(value) = C::try_from(message) else {
        return Ok(());
    };
    let again = C::try_from(P::from(&value));
    prop_assert!(
        again.as_ref().is_ok_and(|v| *v == value),
        "{value:?} is not stable"
    );
    Ok(())
}

fn edits() -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec((any::<usize>(), any::<u8>()), 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn corrupted_jobs_never_panic(edits in edits()) {
        let bytes = corrupt(pb::Job::from(&full_job()).encode_to_vec(), &edits);
        check_stable::<Job, pb::Job>(&bytes)?;
    }

    #[test]
    fn corrupted_allocations_never_panic(edits in edits()) {
        let bytes = corrupt(pb::Allocation::from(&full_alloc()).encode_to_vec(), &edits);
        check_stable::<Allocation, pb::Allocation>(&bytes)?;
    }

    #[test]
    fn corrupted_evaluations_never_panic(edits in edits()) {
        let bytes = corrupt(pb::Evaluation::from(&full_eval()).encode_to_vec(), &edits);
        check_stable::<Evaluation, pb::Evaluation>(&bytes)?;
    }

    #[test]
    fn corrupted_nodes_never_panic(edits in edits()) {
        let bytes = corrupt(pb::Node::from(&full_node()).encode_to_vec(), &edits);
        check_stable::<Node, pb::Node>(&bytes)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic_request_decoding(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        // Requests have no inverse conversion; what holds is that decoding finishes and
        // that every refusal names the field it is about.
        use drover_proto::convert as c;
        let mut errors = Vec::new();
        if let Ok(m) = pb::UpdateAllocationsRequest::decode(bytes.as_slice()) {
            errors.extend(c::AllocUpdates::try_from(m).err());
        }
        if let Ok(m) = pb::RegisterNodeRequest::decode(bytes.as_slice()) {
            errors.extend(c::NodeRegistration::try_from(m).err());
        }
        if let Ok(m) = pb::SubscribeRequest::decode(bytes.as_slice()) {
            errors.extend(c::EventFilter::try_from(m).err());
        }
        if let Ok(m) = pb::RegisterJobRequest::decode(bytes.as_slice()) {
            errors.extend(c::JobRegistration::try_from(m).err());
        }
        for e in errors {
            prop_assert!(!e.path().is_empty(), "refusal without a field: {e}");
            prop_assert!(e.to_string().starts_with(e.path()));
        }
    }
}
