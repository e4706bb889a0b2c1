"""The Files API (`/v1/files`) and the Vector stores API (`/v1/vector_stores`), in OpenAI's
shape, also under `/v1/openai/v1/` (common.ALIASES). Services: services/files.py."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal, get_args

from fastapi import APIRouter, Path, Query, Request, Response
from starlette.datastructures import UploadFile

from ..api.files import (
    AttachFileRequest,
    CreateUploadRequest,
    CreateVectorStoreRequest,
    FileDeleted,
    FileObject,
    FilePurpose,
    ListFilesResponse,
    ListVectorStoreFilesResponse,
    ListVectorStoresResponse,
    SearchContent,
    SearchRequest,
    SearchResultObject,
    SearchResultsPage,
    UpdateVectorStoreRequest,
    UploadObject,
    VectorStoreDeleted,
    VectorStoreFileDeleted,
    VectorStoreFileObject,
    VectorStoreObject,
)
from ..errors import InvalidRequest, TooLarge
from .common import ID_PATTERN, json_response
from .deps import Svc, Tenant

files_router = APIRouter(tags=["Files"])
vector_stores_router = APIRouter(tags=["Vector stores"])

FileId = Annotated[str, Path(pattern=ID_PATTERN)]
StoreId = Annotated[str, Path(pattern=ID_PATTERN)]
After = Annotated[str | None, Query(pattern=ID_PATTERN)]
OrderParam = Annotated[Literal["asc", "desc"], Query()]
#: What a multipart request may hold besides the file: the form's fields and boundaries.
FORM_OVERHEAD_BYTES = 64 * 1024


# --- files --------------------------------------------------------------------------------


#: The form `POST /v1/files` reads itself (to refuse an oversized body before parsing it).
_UPLOAD_FORM = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "purpose"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "purpose": {"type": "string", "enum": list(get_args(FilePurpose))},
                    },
                }
            }
        },
    }
}


@files_router.post("/v1/files", responses={200: {"model": FileObject}}, openapi_extra=_UPLOAD_FORM)
async def upload_file(request: Request, tenant: Tenant, svc: Svc) -> Response:
    """Multipart `file` and `purpose`. Refused with a 413 past FILE_MAX_BYTES, before the body
    is read when its length says so."""
    limit = svc.settings.file_max_bytes
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit + FORM_OVERHEAD_BYTES:
        raise TooLarge(f"A file may hold at most {limit} bytes")
    content_type = request.headers.get("content-type", "")
    if not content_type.startswith("multipart/form-data"):
        raise InvalidRequest("send the file as multipart/form-data with `file` and `purpose`")
    try:
        form = await request.form(max_files=1, max_fields=8)
    except Exception as err:  # Starlette's MultiPartException and the parser's own
        raise InvalidRequest(f"the multipart body could not be read: {err}") from None
    try:
        purpose, upload = form.get("purpose"), form.get("file")
        if not isinstance(purpose, str) or not purpose:
            raise InvalidRequest("`purpose` is required")
        if purpose not in get_args(FilePurpose):
            raise InvalidRequest(f"`purpose` must be one of {', '.join(get_args(FilePurpose))}")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("`file` is required (a file part)")
        data = await upload.read(limit + 1)
        if len(data) > limit:
            raise TooLarge(f"A file may hold at most {limit} bytes")
        filename = (upload.filename or "upload").rsplit("/", 1)[-1][:255] or "upload"
    finally:
        await form.close()
    file = await asyncio.to_thread(svc.files.upload, tenant, filename, purpose, data)
    return json_response(file)


@files_router.post("/v1/files/uploads", responses={200: {"model": UploadObject}})
def create_upload(body: CreateUploadRequest, tenant: Tenant, svc: Svc) -> Response:
    """A presigned upload (this server's extension, for files larger than a request carries):
    PUT the bytes to `upload_url` with `headers`, then complete it."""
    file, url, headers, expires_at = svc.files.start_upload(
        tenant, body.filename, body.purpose, body.bytes
    )
    return json_response(
        UploadObject(
            id=file.id,
            filename=file.filename,
            purpose=file.purpose,
            bytes=file.bytes,
            upload_url=url,
            headers=headers,
            expires_at=expires_at,
        )
    )


@files_router.post("/v1/files/uploads/{file_id}/complete", responses={200: {"model": FileObject}})
def complete_upload(file_id: FileId, tenant: Tenant, svc: Svc) -> Response:
    return json_response(svc.files.complete_upload(tenant, file_id))


@files_router.get("/v1/files", responses={200: {"model": ListFilesResponse}})
def list_files(
    tenant: Tenant,
    svc: Svc,
    after: After = None,
    limit: Annotated[int, Query(ge=1, le=10000)] = 10000,
    order: OrderParam = "desc",
    purpose: Annotated[str | None, Query(max_length=64)] = None,
) -> Response:
    files, more = svc.file_store.list_files(tenant, after, limit, order, purpose)
    return json_response(
        ListFilesResponse(
            data=files,
            first_id=files[0].id if files else None,
            last_id=files[-1].id if files else None,
            has_more=more,
        )
    )


@files_router.get("/v1/files/{file_id}", responses={200: {"model": FileObject}})
def get_file(file_id: FileId, tenant: Tenant, svc: Svc) -> Response:
    return json_response(svc.files.get(tenant, file_id))


@files_router.get(
    "/v1/files/{file_id}/content",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}, "description": "The bytes"}},
)
def get_file_content(file_id: FileId, tenant: Tenant, svc: Svc) -> Response:
    """The file's bytes as uploaded (`application/octet-stream`: the API keeps no type)."""
    _, data = svc.files.content(tenant, file_id)
    return Response(content=data, media_type="application/octet-stream")


@files_router.delete("/v1/files/{file_id}", responses={200: {"model": FileDeleted}})
def delete_file(file_id: FileId, tenant: Tenant, svc: Svc) -> Response:
    """Also takes the file out of every vector store holding it (its vectors too)."""
    svc.files.delete(tenant, file_id)
    return json_response(FileDeleted(id=file_id))


# --- vector stores ------------------------------------------------------------------------


@vector_stores_router.post("/v1/vector_stores", responses={200: {"model": VectorStoreObject}})
def create_vector_store(body: CreateVectorStoreRequest, tenant: Tenant, svc: Svc) -> Response:
    return json_response(svc.vector_stores.create(tenant, body))


@vector_stores_router.get("/v1/vector_stores", responses={200: {"model": ListVectorStoresResponse}})
def list_vector_stores(
    tenant: Tenant,
    svc: Svc,
    after: After = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: OrderParam = "desc",
) -> Response:
    stores, more = svc.vector_stores.list(tenant, after, limit, order)
    return json_response(
        ListVectorStoresResponse(
            data=stores,
            first_id=stores[0].id if stores else None,
            last_id=stores[-1].id if stores else None,
            has_more=more,
        )
    )


@vector_stores_router.get(
    "/v1/vector_stores/{vector_store_id}", responses={200: {"model": VectorStoreObject}}
)
def get_vector_store(vector_store_id: StoreId, tenant: Tenant, svc: Svc) -> Response:
    return json_response(svc.vector_stores.get(tenant, vector_store_id))


@vector_stores_router.post(
    "/v1/vector_stores/{vector_store_id}", responses={200: {"model": VectorStoreObject}}
)
def update_vector_store(
    vector_store_id: StoreId, body: UpdateVectorStoreRequest, tenant: Tenant, svc: Svc
) -> Response:
    changes = body.model_dump(mode="json", exclude_unset=True)
    return json_response(svc.vector_stores.update(tenant, vector_store_id, changes))


@vector_stores_router.delete(
    "/v1/vector_stores/{vector_store_id}", responses={200: {"model": VectorStoreDeleted}}
)
def delete_vector_store(vector_store_id: StoreId, tenant: Tenant, svc: Svc) -> Response:
    svc.vector_stores.delete(tenant, vector_store_id)
    return json_response(VectorStoreDeleted(id=vector_store_id))


@vector_stores_router.post(
    "/v1/vector_stores/{vector_store_id}/files",
    responses={200: {"model": VectorStoreFileObject}},
)
def attach_file(
    vector_store_id: StoreId, body: AttachFileRequest, tenant: Tenant, svc: Svc
) -> Response:
    """Answers at once, `in_progress`; the ingestion worker finishes it."""
    record = svc.vector_stores.attach(
        tenant, vector_store_id, body.file_id, body.attributes, body.chunking_strategy
    )
    return json_response(record)


@vector_stores_router.get(
    "/v1/vector_stores/{vector_store_id}/files",
    responses={200: {"model": ListVectorStoreFilesResponse}},
)
def list_vector_store_files(
    vector_store_id: StoreId,
    tenant: Tenant,
    svc: Svc,
    after: After = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: OrderParam = "desc",
    filter: Annotated[  # noqa: A002 (OpenAI's parameter name)
        Literal["in_progress", "completed", "failed", "cancelled"] | None, Query()
    ] = None,
) -> Response:
    files, more = svc.vector_stores.files(tenant, vector_store_id, after, limit, order, filter)
    return json_response(
        ListVectorStoreFilesResponse(
            data=files,
            first_id=files[0].id if files else None,
            last_id=files[-1].id if files else None,
            has_more=more,
        )
    )


@vector_stores_router.get(
    "/v1/vector_stores/{vector_store_id}/files/{file_id}",
    responses={200: {"model": VectorStoreFileObject}},
)
def get_vector_store_file(
    vector_store_id: StoreId, file_id: FileId, tenant: Tenant, svc: Svc
) -> Response:
    return json_response(svc.vector_stores.file(tenant, vector_store_id, file_id))


@vector_stores_router.delete(
    "/v1/vector_stores/{vector_store_id}/files/{file_id}",
    responses={200: {"model": VectorStoreFileDeleted}},
)
def detach_file(vector_store_id: StoreId, file_id: FileId, tenant: Tenant, svc: Svc) -> Response:
    """The file leaves the store (its vectors deleted); the file itself stays."""
    svc.vector_stores.detach(tenant, vector_store_id, file_id)
    return json_response(VectorStoreFileDeleted(id=file_id))


@vector_stores_router.post(
    "/v1/vector_stores/{vector_store_id}/search",
    responses={200: {"model": SearchResultsPage}},
)
def search_vector_store(
    vector_store_id: StoreId, body: SearchRequest, tenant: Tenant, svc: Svc
) -> Response:
    """`rewrite_query` is accepted and ignored: the query is searched as given."""
    threshold = body.ranking_options.score_threshold if body.ranking_options else None
    results = svc.vector_stores.search(
        tenant, [vector_store_id], body.query, body.max_num_results, body.filters, threshold
    )
    queries = [body.query] if isinstance(body.query, str) else list(body.query)
    return json_response(
        SearchResultsPage(
            search_query=queries,
            data=[
                SearchResultObject(
                    file_id=r.file_id,
                    filename=r.filename,
                    score=r.score,
                    attributes=r.attributes,
                    content=[SearchContent(text=r.text)],
                )
                for r in results
            ],
        )
    )
