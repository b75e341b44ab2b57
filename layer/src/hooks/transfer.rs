//! The transfer commands that touch buffers (chapter "Copy Commands", "Clear Commands"): buffer
//! copies (self-copy regions dropped by enforce, one substitute barrier in their place), fills,
//! updates, and copies between buffers and images. Recording hooks are on the hot path: no
//! global lock, one map lookup at most.

use super::calls_gen;
use super::uses::{buffer_use as buse, uses, Work};
use crate::chassis;
use crate::dispatch::{raw, slice, DeviceData};
use crate::events::{Copy1, Copy2};
use ash::vk;
use echo_analyzer::trace::{Access, UseKind};
use std::ffi::c_void;

/// The buffer range a buffer↔image copy touches (lowest offset, whole rest: conservative).
unsafe fn image_copy_range(count: u32, regions: *const vk::BufferImageCopy) -> u64 {
    if count == 0 || regions.is_null() {
        return 0;
    }
    std::slice::from_raw_parts(regions, count as usize)
        .iter()
        .map(|r| r.buffer_offset)
        .min()
        .unwrap_or(0)
}

/// A command that reads (`to_image`) or writes a buffer as a buffer↔image copy, from `offset`
/// to the end (conservative); `down()` records it.
unsafe fn image_copy(
    dev: &DeviceData,
    cb: u64,
    command: &'static str,
    buffer: vk::Buffer,
    offset: u64,
    to_image: bool,
    down: impl FnOnce(),
) {
    let (access, kind) = if to_image {
        (Access::Read, UseKind::ToImage)
    } else {
        (Access::Write, UseKind::FromImage)
    };
    let u = buse(buffer, offset, vk::WHOLE_SIZE, access, kind);
    uses(dev, cb, command, Work::Names, &[u], down)
}

/// `vkCmdCopyBuffer` and `vkCmdCopyBuffer2` are one description (`events::BufferCopy`): the
/// chassis takes it through the modes (traced, timed, guarded, self-copies dropped).
pub unsafe fn vkCmdCopyBuffer(
    cx: &calls_gen::vkCmdCopyBuffer<'_>,
    cb: vk::CommandBuffer,
    src: vk::Buffer,
    dst: vk::Buffer,
    count: u32,
    regions: *const vk::BufferCopy,
) {
    let c = Copy1 {
        cb,
        src,
        dst,
        count,
        regions,
    };
    chassis::copy(cx.dev, c, |c| {
        cx.down((cx.next)(c.cb, c.src, c.dst, c.count, c.regions))
    })
}

pub unsafe fn vkCmdCopyBuffer2(
    cx: &calls_gen::vkCmdCopyBuffer2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::CopyBufferInfo2<'_>,
) {
    chassis::copy(cx.dev, Copy2::of(cb, info), |c| {
        cx.down((cx.next)(c.cb, c.down()))
    })
}

pub unsafe fn vkCmdFillBuffer(
    cx: &calls_gen::vkCmdFillBuffer<'_>,
    cb: vk::CommandBuffer,
    dst: vk::Buffer,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    data: u32,
) {
    let u = buse(dst, offset, size, Access::Write, UseKind::Fill);
    uses(
        cx.dev,
        raw(cb),
        "vkCmdFillBuffer",
        Work::Names,
        &[u],
        || cx.down((cx.next)(cb, dst, offset, size, data)),
    )
}

pub unsafe fn vkCmdUpdateBuffer(
    cx: &calls_gen::vkCmdUpdateBuffer<'_>,
    cb: vk::CommandBuffer,
    dst: vk::Buffer,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    data: *const c_void,
) {
    let u = buse(dst, offset, size, Access::Write, UseKind::Update);
    uses(
        cx.dev,
        raw(cb),
        "vkCmdUpdateBuffer",
        Work::Names,
        &[u],
        || cx.down((cx.next)(cb, dst, offset, size, data)),
    )
}

pub unsafe fn vkCmdCopyBufferToImage(
    cx: &calls_gen::vkCmdCopyBufferToImage<'_>,
    cb: vk::CommandBuffer,
    src: vk::Buffer,
    dst: vk::Image,
    layout: vk::ImageLayout,
    count: u32,
    regions: *const vk::BufferImageCopy,
) {
    image_copy(
        cx.dev,
        raw(cb),
        "vkCmdCopyBufferToImage",
        src,
        image_copy_range(count, regions),
        true,
        || cx.down((cx.next)(cb, src, dst, layout, count, regions)),
    )
}

pub unsafe fn vkCmdCopyImageToBuffer(
    cx: &calls_gen::vkCmdCopyImageToBuffer<'_>,
    cb: vk::CommandBuffer,
    src: vk::Image,
    layout: vk::ImageLayout,
    dst: vk::Buffer,
    count: u32,
    regions: *const vk::BufferImageCopy,
) {
    image_copy(
        cx.dev,
        raw(cb),
        "vkCmdCopyImageToBuffer",
        dst,
        image_copy_range(count, regions),
        false,
        || cx.down((cx.next)(cb, src, layout, dst, count, regions)),
    )
}

pub unsafe fn vkCmdCopyBufferToImage2(
    cx: &calls_gen::vkCmdCopyBufferToImage2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::CopyBufferToImageInfo2<'_>,
) {
    let i = &*info;
    let off = slice(i.p_regions, i.region_count)
        .iter()
        .map(|r| r.buffer_offset)
        .min()
        .unwrap_or(0);
    image_copy(
        cx.dev,
        raw(cb),
        "vkCmdCopyBufferToImage2",
        i.src_buffer,
        off,
        true,
        || cx.down((cx.next)(cb, info)),
    )
}

pub unsafe fn vkCmdCopyImageToBuffer2(
    cx: &calls_gen::vkCmdCopyImageToBuffer2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::CopyImageToBufferInfo2<'_>,
) {
    let i = &*info;
    let off = slice(i.p_regions, i.region_count)
        .iter()
        .map(|r| r.buffer_offset)
        .min()
        .unwrap_or(0);
    image_copy(
        cx.dev,
        raw(cb),
        "vkCmdCopyImageToBuffer2",
        i.dst_buffer,
        off,
        false,
        || cx.down((cx.next)(cb, info)),
    )
}
