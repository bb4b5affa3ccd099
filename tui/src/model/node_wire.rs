//! Nodes as a load reads them: the node list's answers with each node's attributes and
//! meta skipped while they are decoded. A real node carries dozens of fingerprinted
//! attributes; for a hundred thousand nodes they would be millions of strings made only to
//! be dropped, as the console shows none of them (see [`decode_node`](super::decode_node)).

use drover_proto::v1 as pb;
use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType, skip_field};

/// Field numbers of `attributes` and `meta` in `drover.v1.Node`.
const ATTRIBUTES: u32 = 5;
const META: u32 = 6;

/// `drover.v1.Node` less its attributes and meta. Every other field is decoded by the
/// generated message itself, so a field added to nodes later is read here too.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListedNode(pub pb::Node);

impl prost::Message for ListedNode {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.0.encode_raw(buf)
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            ATTRIBUTES | META => skip_field(wire_type, tag, buf, ctx),
            _ => self.0.merge_field(tag, wire_type, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        self.0.encoded_len()
    }

    fn clear(&mut self) {
        self.0.clear()
    }
}

/// `drover.v1.NodeListEntry`, of which the console keeps the node.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListedNodeEntry {
    #[prost(message, optional, tag = "1")]
    pub node: Option<ListedNode>,
}

/// `drover.v1.NodeListResponse` with its nodes read as [`ListedNode`]s.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListedNodePage {
    #[prost(message, repeated, tag = "1")]
    pub nodes: Vec<ListedNodeEntry>,
    #[prost(message, optional, tag = "2")]
    pub counts: Option<pb::NodeHealthCounts>,
    #[prost(uint64, tag = "3")]
    pub index: u64,
    #[prost(message, optional, tag = "4")]
    pub health_periods: Option<pb::HealthPeriods>,
    #[prost(string, tag = "5")]
    pub next_token: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::{NodeEvent, Timestamp, mock};
    use prost::Message;

    /// A page read as the load reads it is the page itself, less every node's attributes
    /// and meta.
    #[test]
    fn listed_nodes_are_the_nodes_without_attributes_and_meta() {
        let mut node = mock::node(3);
        node.meta.insert("rack".into(), "r1".into());
        node.last_snapshot = Some("snap-1".into());
        node.events.push(NodeEvent {
            time: Timestamp::from_millis(5_000),
            subsystem: "cluster".into(),
            message: "registered".into(),
        });
        let answer = pb::NodeListResponse {
            nodes: vec![pb::NodeListEntry {
                node: Some(pb::Node::from(&node)),
                live_allocs: 2,
                allocated: None,
                health_time_left_ms: Some(9),
            }],
            counts: Some(pb::NodeHealthCounts {
                healthy: 1,
                ..Default::default()
            }),
            index: 12,
            health_periods: Some(pb::HealthPeriods {
                lost_grace_ms: 1,
                flaky_cool_down_ms: 2,
            }),
            next_token: "next".into(),
        };
        let page = ListedNodePage::decode(answer.encode_to_vec().as_slice())
            .expect("the same wire format");
        let mut want = pb::Node::from(&node);
        want.attributes.clear();
        want.meta.clear();
        assert_eq!(page.nodes[0].node, Some(ListedNode(want)));
        assert_eq!(
            (
                page.counts,
                page.index,
                page.health_periods,
                page.next_token
            ),
            (answer.counts, 12, answer.health_periods, "next".to_owned())
        );
    }
}
