/*
 * The part of oidc-provider 9's API this service uses. The package ships no type declarations (and
 * @types/oidc-provider trails the releases); these are written from its source and kept to what the
 * code here touches. Configuration objects are checked by oidc-provider itself at construction.
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export type AdapterPayload = Record<string, unknown> & {
    jti?: string;
    grantId?: string;
    uid?: string;
    userCode?: string;
    consumed?: number;
    exp?: number;
    iat?: number;
  };

  /** One per model name (`AccessToken`, `Grant`, `Client`, `Session`, `Interaction`, ...). */
  export interface Adapter {
    upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void>;
    find(id: string): Promise<AdapterPayload | undefined>;
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
    findByUid(uid: string): Promise<AdapterPayload | undefined>;
    consume(id: string): Promise<void>;
    destroy(id: string): Promise<void>;
    revokeByGrantId(grantId: string): Promise<void>;
  }

  export interface ClientMetadata {
    client_id?: string;
    client_name?: string;
    application_type?: string;
    redirect_uris?: string[];
    grant_types?: string[];
    response_types?: string[];
    token_endpoint_auth_method?: string;
    scope?: string;
    [key: string]: unknown;
  }

  export interface Client {
    clientId: string;
    clientName?: string;
    applicationType?: string;
    redirectUris: string[];
    clientAuthMethod: string;
    grantTypeAllowed(type: string): boolean;
    metadata(): ClientMetadata;
  }

  export interface ResourceServer {
    scope: string;
    audience?: string;
    accessTokenTTL?: number;
    accessTokenFormat?: 'opaque' | 'jwt';
  }

  export interface KoaContextWithOIDC {
    ip: string;
    get(header: string): string;
    set(header: string, value: string): void;
    status: number;
    type: string;
    body: unknown;
    oidc: {
      route: string;
      provider: Provider;
      client?: Client;
      params?: Record<string, unknown>;
      body?: Record<string, unknown>;
      result?: { consent?: { grantId?: string } } & Record<string, unknown>;
      entities: Record<string, unknown>;
    };
  }

  export interface InteractionDetails {
    uid: string;
    returnTo: string;
    params: Record<string, unknown> & { client_id?: string; redirect_uri?: string; scope?: string };
    prompt: {
      name: string;
      reasons: string[];
      details: Record<string, unknown> & {
        missingOIDCScope?: string[];
        missingResourceScopes?: Record<string, string[]>;
      };
    };
    session?: { accountId: string; uid?: string };
    grantId?: string;
    lastSubmission?: Record<string, unknown>;
  }

  export type InteractionResult =
    | { login: { accountId: string; remember?: boolean } }
    | { consent: { grantId: string } }
    | { error: string; error_description?: string };

  interface BaseModel {
    jti: string;
    iat?: number;
    exp?: number;
    readonly isExpired: boolean;
    save(): Promise<string>;
    destroy(): Promise<void>;
  }

  export interface AccessToken extends BaseModel {
    accountId?: string;
    clientId: string;
    grantId?: string;
    aud?: string | string[];
    scope?: string;
    jkt?: string;
    'x5t#S256'?: string;
    readonly scopes: Set<string>;
    isSenderConstrained(): boolean;
  }

  export interface Grant extends BaseModel {
    accountId: string;
    clientId: string;
    resources?: Record<string, string>;
    addOIDCScope(scope: string): void;
    addResourceScope(resource: string, scope: string): void;
    getResourceScope(resource: string): string;
  }

  export interface ModelClass<T, I> {
    new (init: I): T;
    find(id: string, options?: { ignoreExpiration?: boolean }): Promise<T | undefined>;
  }

  export class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    readonly issuer: string;
    proxy: boolean;
    callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void>;
    /**
     * A Koa middleware around oidc-provider's routes (before them, and after them once they return):
     * `_matchedRoute` is its router's route for the request, unset when none took it.
     */
    use(
      middleware: (
        ctx: {
          req: IncomingMessage;
          status: number;
          type: string;
          body: unknown;
          _matchedRoute?: string;
        },
        next: () => Promise<void>,
      ) => Promise<void>,
    ): this;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>;
    interactionResult(
      req: IncomingMessage,
      res: ServerResponse,
      result: InteractionResult,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<string>;
    on(event: string, listener: (...args: unknown[]) => void): this;
    readonly Grant: ModelClass<Grant, { accountId: string; clientId: string; exp?: number }>;
    readonly AccessToken: ModelClass<
      AccessToken,
      {
        accountId: string;
        clientId?: string;
        client?: Client;
        grantId: string;
        scope?: string;
        aud?: string;
        expiresIn?: number;
        gty?: string;
      }
    >;
    readonly Client: { find(id: string): Promise<Client | undefined> };
  }

  export default Provider;

  export const errors: {
    InvalidClientMetadata: new (description: string) => Error;
    InvalidTarget: new (description?: string) => Error;
    InvalidRequest: new (description: string) => Error;
    OIDCProviderError: new (
      status: number,
      message: string,
    ) => Error & {
      error: string;
      error_description?: string;
      status: number;
    };
  };
}
