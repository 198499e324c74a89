package io.fencer.client;

/**
 * LossReason says why a lease was lost: {@code code} is {@code lease_lost}
 * (its local deadline passed with no renewal confirmed, or the server refused
 * a renewal) or {@code revoked} (an operator revoked it); {@code cause} is the
 * exception a caller would have got, a {@link LeaseLostException} or
 * {@link RevokedException}. A release is never a loss.
 */
public record LossReason(String code, String message, LeaseLostException cause) {
    /** The code of a lease whose deadline passed or whose renewal was refused. */
    public static final String LEASE_LOST = "lease_lost";
    /** The code of a lease an operator revoked. */
    public static final String REVOKED = "revoked";
}
