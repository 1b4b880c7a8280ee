// DataCopy moves whole 32-byte blocks; the rest of a tile goes in one DataCopyPad block.
template <typename T>
__aicore__ inline void CopyGmToUbPadded(const LocalTensor<T>& dst, const GlobalTensor<T>& src,
                                        uint32_t count)
{
    const uint32_t aligned = count / (32 / sizeof(T)) * (32 / sizeof(T));
    if (aligned > 0) {
        DataCopy(dst, src, aligned);
    }
    if (aligned < count) {
        DataCopyExtParams params{1, static_cast<uint32_t>((count - aligned) * sizeof(T)), 0, 0, 0};
        DataCopyPadExtParams<T> padParams;
        DataCopyPad(dst[aligned], src[aligned], params, padParams);
    }
}

// The UB -> GM counterpart: DataCopyPad writes exactly the remaining bytes.
template <typename T>
__aicore__ inline void CopyUbToGmPadded(const GlobalTensor<T>& dst, const LocalTensor<T>& src,
                                        uint32_t count)
{
    const uint32_t aligned = count / (32 / sizeof(T)) * (32 / sizeof(T));
    if (aligned > 0) {
        DataCopy(dst, src, aligned);
    }
    if (aligned < count) {
        DataCopyExtParams params{1, static_cast<uint32_t>((count - aligned) * sizeof(T)), 0, 0, 0};
        DataCopyPad(dst[aligned], src[aligned], params);
    }
}
