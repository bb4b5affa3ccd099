//! The protobuf codec every drover service and client uses: prost's, with a small first
//! buffer, and a decoder that first checks what the message may cost to decode
//! ([`crate::decode_budget`]).
//!
//! tonic gives each response stream its own encode buffer, kept for the stream's life and
//! grown to the largest message sent on it. Every node holds an allocation watch open, and
//! at tonic's default of 8 KiB the buffers alone came to 80 MB on a server with 10,000
//! nodes whose watch messages are mostly a few hundred bytes. Starting at 1 KiB, a stream
//! holds what its messages need; one that sends a big message grows as before.

use crate::decode_budget::{self, MessageShape};
use bytes::Buf;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// The first size of a message buffer.
pub const BUFFER_BYTES: usize = 1024;
/// How much encoded output a stream gathers before handing it to HTTP/2 (tonic's default).
pub const YIELD_BYTES: usize = 32 * 1024;

fn settings() -> BufferSettings {
    BufferSettings::new(BUFFER_BYTES, YIELD_BYTES)
}

/// [`ProstCodec`] with [`BUFFER_BYTES`] buffers; named in the generated code.
#[derive(Debug, Clone, Copy)]
pub struct DroverCodec<T, U>(std::marker::PhantomData<(T, U)>);

impl<T, U> Default for DroverCodec<T, U> {
    fn default() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<T, U> Codec for DroverCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + prost::Name + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = BoundedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        BoundedDecoder {
            inner: ProstCodec::<T, U>::raw_decoder(settings()),
            shape: decode_budget::shape_of(&U::full_name()),
        }
    }
}

/// prost's decoder behind [`decode_budget::check`]: a message that would cost too much to
/// decode is refused (INVALID_ARGUMENT naming the field) before prost allocates for it.
#[derive(Debug)]
pub struct BoundedDecoder<U> {
    inner: ProstDecoder<U>,
    shape: Option<&'static MessageShape>,
}

impl<U: prost::Message + Default> Decoder for BoundedDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        if let Some(shape) = self.shape
            && buf.chunk().len() == buf.remaining()
        {
            decode_budget::check(shape, buf.chunk())?;
        }
        self.inner.decode(buf)
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.inner.buffer_settings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::codec::Encoder;

    #[test]
    fn streams_start_with_a_small_buffer() {
        let mut codec = DroverCodec::<crate::v1::WatchAllocationsResponse, ()>::default();
        let settings = format!("{:?}", codec.encoder().buffer_settings());
        assert!(settings.contains("buffer_size: 1024,"), "{settings}");
    }
}
